package cluster

import "github.com/redis/go-redis/v9"

// acquireSrc decides a batch of calls atomically, on Redis's clock.
//
// KEYS[1] is the namespace's gateway set (member: gateway id, score: last
// beat in Redis ms); KEYS[2..] are the calls' window hashes. ARGV[1] is the
// gateway expiry in ms; then 6 per call: count, n, bucket ms, bucket count,
// avgLocal flag, demand (the caller's calls per second on this window; 0:
// no lease). Returns three numbers per call: first 0 for a pass, else the
// call is blocked and the number is the µs until the next bucket boundary,
// before which the window cannot free a token (only an avgLocal gateway
// joining can); then, for a pass, the extra tokens leased to the caller
// (counted now, in the current bucket) and the µs until that bucket ends.
// A lease is about demand x the time left in the bucket, at most
// limit/buckets (the window's average per bucket), and only while the window
// stays at most half full.
//
// Writes after TIME need effects replication: the default since Redis 5, and
// asked for with redis.replicate_commands() on 3.2 and 4 (a no-op on 7).
//
// A window hash holds one field per bucket (Redis ms / bucket ms -> passes),
// 'l' (newest bucket seen) and 't' (passes in buckets l-nb..l). Expired
// buckets are subtracted and deleted as time moves on, so a call costs O(1)
// amortised; a window is read and written once per batch, so many calls on
// one hot rule cost little more than one. If Redis's clock steps back (failover to a replica), calls count
// into the newest bucket rather than reopening old ones.
const acquireSrc = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(nowus / 1000)
local live = -1
local out = {}
local st = {}
local order = {}
for i = 2, #KEYS do
  local a = (i - 2) * 6 + 2
  local limit = tonumber(ARGV[a])
  local n = tonumber(ARGV[a + 1])
  local bms = tonumber(ARGV[a + 2])
  local nb = tonumber(ARGV[a + 3])
  if ARGV[a + 4] == '1' then
    if live < 0 then
      redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]))
      live = redis.call('ZCARD', KEYS[1])
      if live < 1 then live = 1 end
    end
    limit = limit * live
  end
  local k = KEYS[i]
  local s = st[k]
  if not s then
    -- first call on this window in the batch: load it and drop expired buckets
    local b = math.floor(now / bms)
    local h = redis.call('HMGET', k, 'l', 't')
    local last = tonumber(h[1])
    s = {b = b, total = tonumber(h[2]) or 0, add = 0, changed = false, ttl = (nb + 2) * bms}
    if last == nil then
      s.last = b
    elseif b - last > nb then
      redis.call('DEL', k)
      s.total = 0
      s.last = b
      s.changed = true
    elseif b > last then
      for j = last - nb, b - nb - 1 do
        local c = redis.call('HGET', k, tostring(j))
        if c then
          s.total = s.total - tonumber(c)
          redis.call('HDEL', k, tostring(j))
        end
      end
      s.last = b
      s.changed = true
    else
      s.last = last
      s.b = last
    end
    st[k] = s
    order[#order + 1] = k
  end
  if s.total + n <= limit then
    s.total = s.total + n
    s.add = s.add + n
    local x, rem = 0, 0
    local demand = tonumber(ARGV[a + 5])
    if demand > 0 then
      rem = (s.b + 1) * bms * 1000 - nowus
      if rem > bms * 1000 then rem = bms * 1000 end
      -- only while the window stays at most half full: unused leased tokens
      -- are lost, and far from the limit losing some blocks nobody
      x = math.min(math.floor(demand * rem / 1000000), math.floor(limit / nb), math.floor(limit / 2 - s.total))
      if x > 0 and rem > 0 then
        s.total = s.total + x
        s.add = s.add + x
      else
        x, rem = 0, 0
      end
    end
    out[#out + 1] = 0
    out[#out + 1] = x
    out[#out + 1] = rem
  else
    -- blocked: no bucket can expire before the next bucket boundary
    local r = (s.b + 1) * bms * 1000 - nowus
    if r > bms * 1000 then r = bms * 1000 end
    if r < 1 then r = 1 end
    out[#out + 1] = r
    out[#out + 1] = 0
    out[#out + 1] = 0
  end
end
-- write each window back once, however many calls of the batch it took
for _, k in ipairs(order) do
  local s = st[k]
  if s.add > 0 then
    redis.call('HINCRBY', k, tostring(s.b), s.add)
    s.changed = true
  end
  if s.changed then
    redis.call('HSET', k, 'l', tostring(s.last), 't', tostring(s.total))
    redis.call('PEXPIRE', k, s.ttl)
  end
end
return out
`

// beatSrc announces a gateway: KEYS[1] gateway set, ARGV[1] gateway id,
// ARGV[2] expiry ms. The set itself expires when every gateway is gone.
const beatSrc = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - exp)
redis.call('PEXPIRE', KEYS[1], exp * 2)
return redis.call('ZCARD', KEYS[1])
`

// scripts are immutable once built; Service holds its own so that no
// package state exists.
type scripts struct {
	acquire, beat *redis.Script
}

func newScripts() scripts {
	return scripts{acquire: redis.NewScript(acquireSrc), beat: redis.NewScript(beatSrc)}
}
