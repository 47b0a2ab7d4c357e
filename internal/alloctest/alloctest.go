// Package alloctest measures what code allocates, for the tests that bound
// the memory a hostile input costs (a rules document, an edit, a pulled
// file).
package alloctest

import "runtime"

// Bytes returns the bytes f allocated on the heap (TotalAlloc across it,
// after a collection), garbage included: what a refused input costs is
// what it made the process take, not what it kept.
func Bytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
