package cluster

// AcquireSrc lets the baseline benchmark run the same script one call at a time.
const AcquireSrc = acquireSrc

// WindowShape exposes the bucket layout for tests.
func WindowShape(statIntervalMs int64) (bucketMs, buckets int64) { return windowShape(statIntervalMs) }

// DisableLeases makes every call go to Redis, to measure that path.
func (s *Service) DisableLeases() { s.noLease = true }
