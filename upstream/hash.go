package upstream

// HashKey hashes a request's key (its hashOn value) for Pick. It is FNV-1a
// with a murmur3 finaliser, so that similar keys ("user1", "user2") score
// apart; it is fixed (no random seed) so that every gateway of a fleet, and
// a restarted one, sends a key to the same target. It does not allocate.
func HashKey(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return mix64(h)
}

// mix64 is murmur3's fmix64.
func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
