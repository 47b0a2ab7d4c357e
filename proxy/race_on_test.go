//go:build race

package proxy

const RaceEnabled = true
