//go:build !race

package calendar_test

const zoneStride = 1
