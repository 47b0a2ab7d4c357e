package cluster

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// Shape of a window in Redis; acquireSrc spells the same numbers.
const (
	// ringSlots is the most slots a window's ring has: up to this limit a
	// slot is one token, above it one group of ceil(limit/ringSlots) tokens.
	ringSlots = 1024
	// headerBytes precede the ring in a window's string: K, g, S, head,
	// tail fill, newest stamp, returned tokens not yet removed and
	// their stamp, and (avgLocal) the live gateways counted with and when
	// they were read, as little-endian doubles.
	headerBytes = 80
)

// quotaMarkLife is how long Redis keeps the mark of a calendar quota
// give-back it took (never longer than the counter): the marks in memory
// are the give-backs of the last two minutes, not of the whole period (a
// day, a month), whatever the flood of calls a later guard refuses.
// acquireSrc spells it in ms (MARKLIFE).
const quotaMarkLife = 2 * time.Minute

// acquireSrc decides a batch of calls atomically, on Redis's clock.
//
// KEYS are the calls' windows, all in one hash slot (on a Redis Cluster
// the caller runs one script per slot). ARGV[1] is the caller's latest
// reading of the namespace's live gateways (0: none yet) and ARGV[3] when it
// was read (Redis ms, on the gateway set's clock); ARGV[2] is 0, or (tests
// only) the instant in µs to decide at instead of TIME; then 8 per call:
// count, n, statIntervalMs, avgLocal flag,
// demand (the caller's tokens per second on this window; 0: no lease; a
// calendar quota's give-back, op 5, has its id there),
// the tokens the caller returns with their stamp (0 0: none; leased
// tokens it did not use, or a pass a later check blocked), and op: 0 takes n tokens if they fit, 1 (peek) only says
// whether they would, 2 (charge: a call counted after its answer) takes
// them whether or not they fit (see charge below), 3 is 0 and 4 is 1 that
// also say what is left. Returns seven numbers per call: first 0 for a
// pass, else the call is blocked and the number is the µs until the window
// can take its n tokens (when the slot that stands in the way leaves; only
// an avgLocal gateway joining can make it sooner); then, for a pass, the
// extra tokens leased to the caller, the µs they may be used for, and
// their stamp; then for op 3's or 4's pass the tokens the window has left
// after it and its lease (else -1), and the µs until the window's oldest
// pass leaves it (0: none in it): one binary search of the window (O(log
// S) slot reads) per window and batch, which only ops 3 and 4 pay; last,
// for op 0's or 3's pass, the stamp of the call's own n tokens (else 0),
// by which a caller that did not use them (a later check blocked the call)
// returns them as it returns unused leased tokens.
//
// The window is an exact sliding window: a call passes iff the passes of the
// last statIntervalMs (ending now) plus its n are at most K = floor(limit),
// limit = count (x live gateways for avgLocal); a limit under one call an
// interval is floor(m x limit) calls per m intervals, m = ceil(1/limit),
// as a local rule counts it (0.5 a second: one call in any 2 s). It is a string: an 80-byte
// header, then a ring of S slots of 8 bytes, each the time (Redis µs, as a
// double) of one group of g tokens, g = ceil(K/1024), S = ceil(K/g), in
// insertion order; head is the oldest slot, head-1 the newest (the tail),
// which holds f tokens, every other slot g. Times never decrease along the
// ring (a pass is stamped max(now, newest)), so the slots still in the
// window are the newest ones, and "at most X slots in the window" is one
// look at the (X+1)-th newest slot. A group counts until its newest token
// leaves, so above 1024 a window passes at most g-1 tokens (1/1024) less
// than K, never more. A call reads one slot and writes its own (buffered,
// written once per batch), so it is O(1); a window is read in 32-slot chunks.
//
// Leases: after a pass, if the caller's demand would fill at most half of K
// in an interval and the window stays at most half full with them, the
// script adds demand x L tokens stamped L from now, the last instant the
// caller may use them: so they stay in the window long enough wherever they
// are used, and passes decided meanwhile are stamped no earlier (at most L
// late). L is at most interval/40, and at most as long as K/2048 tokens take
// at the caller's demand or at the window's rate (over the interval, and
// over its last 64th, which follows a rising load), so that what leases hold
// back from clients stays about K/2048 a gateway and K/2048 in all: a lease
// is at most K/2048 tokens. A leased token the caller did not
// use would count as a pass for an interval; the caller returns it with its
// next call on the window, once, and the script removes as many of the
// window's newest slots stamped no later than it (the unused tokens, or as
// good; whole groups above 1024, and then never the tail group, which may
// be partial), moving the older ones up so the ring stays in order. A pass
// that a later check blocked is returned the same way, with the stamp of
// its own tokens. Returned tokens no slot could stand for yet (part of a
// group, or only the tail of groups) stay pending in the header, added to
// by the next return with the earliest stamp of both; any call that reads
// the window tries them again first.
//
// avgLocal: limit = count x live gateways. The gateway set sits in another
// slot than the windows on a Redis Cluster, so a script cannot read it:
// each gateway reads it with its heartbeat and passes its reading along,
// and an avgLocal window keeps the newest reading any gateway gave it (by
// the stamp), ignoring older ones. So gateways whose readings are a beat
// apart do not make K flap; a joining gateway's reading, newer than every
// other, counts from its first call. When K changes the ring is rebuilt
// with the newest min(passes, K) of its passes: a pass dropped is older than
// every pass kept, so no real interval gets more than the new K. The
// passes dropped are kept as a debt in the pending returns (below 0, with
// the newest dropped stamp): a return stamped no later pays it off
// instead of removing a pass kept that shares its stamp, and when K changes
// again the debt counts as passes stamped then, the oldest, so a limit that
// grows back within the interval still counts the passes it dropped.
//
// A calendar quota's call (avgLocal flag 'q', statIntervalMs replaced by
// the Unix ms its key expires at, no lease) is decided on a counter of its
// period's calls instead: it passes iff the count plus n is at most
// K = floor(count); a pass adds n and moves the expiry on to the one
// asked, or to quotaGrace from now (QGRACE) if that is later, never back:
// the ms asked are the gateway's reset translated to Redis's clock by the
// offset its heartbeat measured, and a gateway whose clock is behind
// Redis's (or before its first heartbeat, one behind by more than
// quotaGrace) asked for an instant already past, which deleted the count
// at every pass and left the quota unlimited; of gateways whose clocks
// disagree, the one whose period ends last keeps it. A peek (op 1) adds
// nothing; a charge (op 2, after a countOn rule's answer) adds n whether or
// not it fits, so the period stays overdrawn until its reset; the counter
// stops at 2^53, so a hostile cost cannot overflow it. A give-back (op 5)
// takes n off the counter, never below 0: a countOn failure call holds its
// place while in flight and returns it unless its answer is a failure. It
// is taken once by its id (in the demand's place; unique in the fleet): a
// give-back whose round trip failed is sent again, and Redis may have run
// it all the same (a timeout), so op 5 first sets a marker, the key
// "<counter's key>:back:<id>" (SET NX, expiring with the counter, or
// quotaMarkLife after it is set if that is sooner: a gateway sends a
// give-back again only within quotaResendWithin of its first send), and
// takes n off only when the marker is new. The marker is not among KEYS:
// a batch's KEYS are one per call, at a fixed stride with ARGV, and the
// marker's name begins with the counter's, hash tag and all, so it lies in
// the counter's slot, which is what a Redis Cluster asks of the keys a
// script touches. The counter stays the integer it was, so a gateway of
// the previous version, whose give-back takes n off without a marker,
// shares it during a rolling upgrade. Every quota op returns 0 or 1
// (blocked: the caller knows the reset), then 0, the calls left, 0, 0, 0,
// 0.
//
// The key expires one interval after its newest stamp. Writes after TIME
// need effects replication: the default since Redis 5, and asked for with
// redis.replicate_commands() on 3.2 and 4 (a no-op on 7).
const acquireSrc = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local real = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = tonumber(ARGV[2])
local synthetic = now > 0
if not synthetic then now = real end
local NMAX, HDR, SPAN, MARKLIFE, QGRACE = 1024, 80, 1024, 120000, 600000
local gwn, gwa = tonumber(ARGV[1]), tonumber(ARGV[3])
local out = {}
local st = {}
local order = {}

-- an empty window of K tokens
local function fresh(s, K)
  s.K = K
  s.g = math.max(1, math.ceil(K / NMAX))
  s.S = math.ceil(K / s.g)
  s.h, s.f, s.tn, s.pc, s.ps, s.fi = 0, s.g, 0, 0, 0, nil
  redis.call('DEL', s.k)
  redis.call('SETRANGE', s.k, HDR + s.S * 8 - 1, '\0')
  s.dirty = true
end

-- K changed: keep the newest min(passes in the window, K2) tokens, regrouped
-- from the oldest kept so that only the tail group is partial
local function rebuild(s, K2)
  local runs, total = {}, 0
  if s.tn > now - s.I then
    local raw = redis.call('GETRANGE', s.k, HDR, HDR + s.S * 8 - 1)
    for j = 0, s.S - 1 do
      local i = (s.h + j) % s.S
      local v = 0
      if #raw >= i * 8 + 8 then v = struct.unpack('<d', raw, i * 8 + 1) end
      if v > now - s.I then
        local c = s.g
        if j == s.S - 1 then c = s.f end
        runs[#runs + 1] = {v, c}
        total = total + c
      end
    end
  end
  -- passes an earlier shrink dropped (a debt, stamped no later than its
  -- stamp) that are still in the window are older than every slot: they
  -- come first, so that a limit that grows back counts them again
  if s.pc and s.pc < 0 and s.ps > now - s.I then
    table.insert(runs, 1, {s.ps, -s.pc})
    total = total - s.pc
  end
  fresh(s, K2)
  local drop = math.max(0, total - K2)
  local debt, debtAt = drop, 0
  local groups, fill = {}, s.g
  for _, r in ipairs(runs) do
    local c = r[2]
    local d = math.min(drop, c)
    if d > 0 then debtAt = math.max(debtAt, r[1]) end
    c, drop = c - d, drop - d
    while c > 0 do
      if fill == s.g then
        groups[#groups + 1] = r[1]
        fill = 0
      end
      local take = math.min(c, s.g - fill)
      fill, c = fill + take, c - take
      groups[#groups] = r[1]
    end
  end
  if #groups > 0 then
    local parts = {}
    for i, v in ipairs(groups) do parts[i] = struct.pack('<d', v) end
    redis.call('SETRANGE', s.k, HDR, table.concat(parts))
    s.h = #groups % s.S
    s.f = fill
    s.tn = groups[#groups]
  end
  -- The passes dropped are no longer in the window: returning one must
  -- not remove a pass kept (passes of one batch share a stamp). A debt
  -- (pending returns below 0) takes the returns stamped no later than the
  -- newest pass dropped until it is paid or those passes leave.
  if debt > 0 then s.pc, s.ps = -debt, debtAt end
end

-- the stamp of slot i: this batch's writes (s.runs, from slot s.lo) first
local function slot(s, i)
  if s.len > 0 then
    local j = (i - s.lo) % s.S
    if j < s.len then
      for _, r in ipairs(s.runs) do
        if j < r[2] then return r[1] end
        j = j - r[2]
      end
    end
  end
  if i == s.li then return s.lv end
  if not (s.c0 and i >= s.c0 and i < s.c0 + s.cn) then
    s.c0, s.cn = i, math.min(32, s.S - i)
    s.cs = redis.call('GETRANGE', s.k, HDR + i * 8, HDR + (i + s.cn) * 8 - 1)
  end
  local p = (i - s.c0) * 8
  local v = 0
  if #s.cs >= p + 8 then v = struct.unpack('<d', s.cs, p + 1) end
  s.li, s.lv = i, v
  return v
end

-- cnt slots from ring position pos on, and writing b (whole slots) there
local function readRing(s, pos, cnt)
  if cnt <= 0 then return '' end
  local a = math.min(cnt, s.S - pos)
  local r = redis.call('GETRANGE', s.k, HDR + pos * 8, HDR + (pos + a) * 8 - 1)
  if a < cnt then r = r .. redis.call('GETRANGE', s.k, HDR, HDR + (cnt - a) * 8 - 1) end
  return r
end

local function writeRing(s, pos, b)
  local cnt = #b / 8
  if cnt <= 0 then return end
  local a = math.min(cnt, s.S - pos)
  redis.call('SETRANGE', s.k, HDR + pos * 8, string.sub(b, 1, a * 8))
  if a < cnt then redis.call('SETRANGE', s.k, HDR, string.sub(b, a * 8 + 1)) end
end

-- how many slots from the oldest hold stamps below v (> now - I): slots that
-- left the window come first, then the window's, in order
local function below(s, v)
  local lo, hi = 0, s.S
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if slot(s, (s.h + mid) % s.S) >= v then hi = mid else lo = mid + 1 end
  end
  return lo
end

-- the tokens of the window stamped after t (t >= now - I)
local function since(s, t)
  if s.tn <= t then return 0 end
  return (s.S - below(s, t + 1) - 1) * s.g + s.f
end

-- r tokens stamped at went unused (leased, or a pass a later check
-- blocked). Each counts until at + I, so removing a slot of the window
-- stamped at or before it never lets a real interval hold more than K; the
-- newest such slots are removed (the unused tokens themselves, or as
-- good), whole groups, and the tail only when a slot is one token (the
-- tail of groups may be partial): then the newest slot left is the tail.
-- A returned token of a group counts until the group leaves, so the
-- returned tokens stand for slots stamped up to the stamp of the oldest
-- group that holds one of them.
-- Returns add up, with their earliest stamp. The window's older slots move up into
-- the gap and emptied slots join those that have left, so the ring stays
-- in order.
local function unvoid(s, r, at)
  local edge = now - s.I
  if at <= edge then return end
  if s.pc < 0 and s.ps > edge then
    -- passes a shrink dropped (the debt) may be what is returned: those
    -- stamped no later than the newest dropped pay it off, removing
    -- nothing; while it lasts, others are not returned either (the one
    -- header field holds the debt): that only ever passes less
    if at <= s.ps then
      local a = math.min(r, -s.pc)
      s.pc, r, s.dirty = s.pc + a, r - a, true
    end
    if s.pc < 0 or r <= 0 then return end
  end
  if s.pc > 0 and s.ps > edge then
    s.pc, s.ps = s.pc + r, math.min(s.ps, at)
  else
    s.pc, s.ps = r, at
  end
  s.dirty = true
  local z = math.floor(s.pc / s.g)
  if z < 1 then return end
  if s.g > 1 then
    -- a token of a group counts as long as its group, stamped with its
    -- newest token: every returned token sits in a slot stamped at least
    -- as late as the oldest slot stamped at or after their earliest stamp
    local j = below(s, s.ps)
    if j < s.S then s.ps = math.max(s.ps, slot(s, (s.h + j) % s.S)) end
  end
  local q = below(s, edge + 1)
  local top = s.S - 1
  if s.g == 1 then top = s.S end
  local p = math.min(below(s, s.ps + 1), top)
  z = math.min(z, p - q)
  if z < 1 then return end
  writeRing(s, (s.h + q + z) % s.S, readRing(s, (s.h + q) % s.S, p - z - q))
  writeRing(s, (s.h + q) % s.S, string.rep('\0', z * 8))
  s.c0, s.li, s.fi = nil, nil, nil
  s.pc = s.pc - z * s.g
  if p == s.S then s.tn = slot(s, (s.h - 1) % s.S) end
end

-- can n tokens be added with at most cap in the window after? true, new
-- slots, tail fill after, whether the tail takes some; or false, µs until
-- they could
local function plan(s, cap, n)
  local inwin = s.tn > now - s.I
  local r = 0
  if inwin then r = s.g - s.f end
  local m, f2 = 0, 0
  if n <= r then
    f2 = s.f + n
  else
    m = math.ceil((n - r) / s.g)
    f2 = n - r - (m - 1) * s.g
  end
  -- slots in the window after = slots now + m, each g but the tail (f2)
  local x = math.floor((cap - f2) / s.g) + 1 - m
  if x < 0 then return false, s.I end
  if inwin and x < s.S then
    local v = slot(s, (s.h - 1 - x) % s.S)
    if v > now - s.I then return false, v + s.I - now end
  end
  return true, m, f2, inwin and r > 0
end

local function add(s, m, f2, fill, v)
  if fill then
    if s.len == 0 then
      s.lo, s.runs, s.len = (s.h - 1) % s.S, {{v, 1}}, 1
    else
      local last = s.runs[#s.runs]
      if last[1] ~= v then
        last[2] = last[2] - 1
        if last[2] == 0 then s.runs[#s.runs] = nil end
        s.runs[#s.runs + 1] = {v, 1}
      end
    end
  end
  if m > 0 then
    if s.len == 0 then s.lo = s.h end
    local last = s.runs[#s.runs]
    if last and last[1] == v then last[2] = last[2] + m else s.runs[#s.runs + 1] = {v, m} end
    s.len = s.len + m
    -- the oldest slot in the window, if written over: the ring is all
    -- window, and its oldest slot is the new head
    if s.fi and (s.fi - s.h) % s.S < m then s.fi = (s.h + m) % s.S end
    s.h = (s.h + m) % s.S
  end
  s.f, s.tn, s.dirty = f2, v, true
end

-- take n tokens whatever the window holds (a call counted after its
-- answer): those past its room take the places of its oldest slots,
-- stamped now, so the window stays full until they leave it. At most the
-- whole ring (K tokens) is taken, and a batch writes each slot once.
local function charge(s, K, n)
  n = math.min(n, K)
  local inwin = s.tn > now - s.I
  local r = 0
  if inwin then r = s.g - s.f end
  local m, f2 = 0, s.f + n
  if n > r then
    m = math.ceil((n - r) / s.g)
    f2 = n - r - (m - 1) * s.g
  end
  local fill = inwin and r > 0
  -- the new slots would cover the ring (with the tail, restamped by the
  -- fill, when it is not this batch's: it is written over then, and its
  -- tokens with it): the window is full
  if m > s.S - s.len or (fill and s.len == 0 and m == s.S) then
    m, f2 = math.max(0, s.S - s.len), s.g
  end
  add(s, m, f2, fill, math.max(now, s.tn))
end

-- what the window has left now, and the µs until its oldest pass leaves
-- it (0: empty): a search of the window, once a batch (s.fi, its oldest
-- slot in the window, is kept until slots move)
local function leftOf(s, K, I)
  if s.tn <= now - I then return K, 0 end
  if not s.fi then s.fi = (s.h + below(s, now - I + 1)) % s.S end
  local q = (s.fi - s.h) % s.S
  return math.max(0, K - ((s.S - q - 1) * s.g + s.f)), math.max(0, slot(s, s.fi) + I - now)
end

local function flush(s)
  if s.len > 0 then
    local parts = {}
    for i, r in ipairs(s.runs) do parts[i] = string.rep(struct.pack('<d', r[1]), r[2]) end
    writeRing(s, s.lo, table.concat(parts))
  end
  redis.call('SETRANGE', s.k, 0, struct.pack('<dddddddddd', s.K, s.g, s.S, s.h, s.f, s.tn, s.pc, s.ps, s.gn, s.ga))
  local ttl = math.max(1, math.ceil((s.tn + s.I - now) / 1000) + 1)
  -- a test's clock may run slower than Redis's: keep its windows
  if synthetic then ttl = math.max(ttl, 600000) end
  redis.call('PEXPIRE', s.k, ttl)
end

-- Redis's clock went back by about d µs (a failover to a replica whose
-- clock is behind, an NTP step): passes are stamped no earlier than the
-- newest, so every pass counted until the clock caught up, and a window
-- at its limit refused every call for as long as the step (an hour back:
-- an hour). Every stamp moves back by d, the newest to now: a pass then
-- counts from now at most as long as it was left to (its real age is
-- more: time went on), so no real interval holds more than K.
local function unstep(s, d)
  local raw = readRing(s, 0, s.S)
  local parts = {}
  for i = 0, s.S - 1 do
    local v = 0
    if #raw >= i * 8 + 8 then v = struct.unpack('<d', raw, i * 8 + 1) end
    parts[i + 1] = struct.pack('<d', v - d)
  end
  writeRing(s, 0, table.concat(parts))
  s.tn = s.tn - d
  if s.pc ~= 0 then s.ps = s.ps - d end
  s.c0, s.li, s.fi = nil, nil, nil
  s.dirty = true
end

-- the window of call a's key, read once per batch, and its K; nil when K < 1
local function window(k, a)
  local s = st[k]
  if not s then
    s = {k = k, I = tonumber(ARGV[a + 2]) * 1000, len = 0, runs = {}, dirty = false, gn = 0, ga = 0}
    local h = redis.call('GETRANGE', k, 0, HDR - 1)
    if #h == HDR then
      s.K, s.g, s.S, s.h, s.f, s.tn, s.pc, s.ps, s.gn, s.ga = struct.unpack('<dddddddddd', h)
    end
    st[k] = s
  end
  local limit = tonumber(ARGV[a])
  if ARGV[a + 3] == '1' then
    -- the newest reading of the live gateways wins; one from the future
    -- (Redis's clock went back since) is no longer the newest
    if gwn > 0 and (gwa > s.ga or s.ga > math.floor(real / 1000) + 1000) then s.gn, s.ga, s.dirty = gwn, gwa, true end
    limit = limit * math.max(1, s.gn)
  end
  local K = math.floor(limit + 1e-9)
  s.I = tonumber(ARGV[a + 2]) * 1000
  if K < 1 and limit > 0 then
    -- under one call an interval: one call per the fewest whole
    -- intervals that hold one, as a local rule counts it (0.5 a second:
    -- one call in any 2 s)
    local m = math.ceil(1 / limit)
    K = math.floor(m * limit + 1e-9)
    s.I = s.I * m
  end
  if K < 1 then return nil, K end
  -- a lease stamps at most I/40 ahead of now: a newest stamp further
  -- ahead is from before a step back of the clock
  if s.K and not s.stepped and s.tn > now + s.I / 40 + 1000 then unstep(s, s.tn - now) end
  s.stepped = true
  if not s.K then fresh(s, K) elseif s.K ~= K then rebuild(s, K) end
  if not s.listed then
    s.listed = true
    order[#order + 1] = k
  end
  return s, K
end

-- first the tokens callers return, so that the whole batch sees them;
-- returned tokens a window kept pending (its newest slot is never
-- removed) are tried again as soon as a call reads the window
for i = 1, #KEYS do
  local a = (i - 1) * 8 + 4
  if ARGV[a + 5] ~= '0' then
    local s = window(KEYS[i], a)
    if s then unvoid(s, tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6])) end
  elseif ARGV[a + 3] ~= 'q' then
    local s = window(KEYS[i], a)
    if s and s.pc >= s.g and s.ps > now - s.I then unvoid(s, 0, s.ps) end
  end
end

-- a calendar quota's call: a counter of the period's calls; op '1' only
-- asks whether n fit, op '2' adds n whether or not they fit, op '5' takes
-- n back (a countOn failure call that was no failure), never below 0, once
-- per give-back id (ARGV[a + 4]; its marker shares k's hash tag, and so
-- its slot: see above). The counter
-- saturates at QMAX (2^53, where a Lua number stops being exact and far
-- beyond any count): an upstream's answers may cost anything, and INCRBY
-- past 2^63 would fail the script, and with it the gateway's breaker
local QMAX = 9007199254740992
local function quota(k, a, op)
  local K = math.floor(tonumber(ARGV[a]) + 1e-9)
  local n = tonumber(ARGV[a + 1])
  local used = tonumber(redis.call('GET', k) or '0')
  if op == '5' then
    local mark = k .. ':back:' .. ARGV[a + 4]
    if redis.call('SET', mark, '1', 'NX') then
      local gone = math.min(tonumber(ARGV[a + 2]), math.floor(real / 1000) + MARKLIFE)
      redis.call('PEXPIREAT', mark, string.format('%d', gone))
      n = math.min(n, used)
      if n > 0 then used = redis.call('DECRBY', k, string.format('%d', n)) end
    end
    return 0, math.max(0, K - used)
  end
  if op ~= '2' and used + n > K then return 1, math.max(0, K - used) end
  if op == '1' then return 0, K - used end
  n = math.max(0, math.min(n, QMAX - used))
  used = redis.call('INCRBY', k, string.format('%d', n))
  -- never sooner than QGRACE from now, nor sooner than another gateway
  -- asked: an expiry already past on this clock deleted the count at once
  local ms = math.floor(real / 1000)
  local at = math.max(tonumber(ARGV[a + 2]), ms + QGRACE)
  local ttl = redis.call('PTTL', k)
  if ttl < 0 or ms + ttl < at then redis.call('PEXPIREAT', k, string.format('%d', at)) end
  return 0, math.max(0, K - used)
end

for i = 1, #KEYS do
  local a = (i - 1) * 8 + 4
  local op = ARGV[a + 7]
  if ARGV[a + 3] == 'q' then
    local res, left = quota(KEYS[i], a, op)
    out[#out + 1] = res
    out[#out + 1] = 0
    out[#out + 1] = left
    out[#out + 1] = 0
    out[#out + 1] = 0
    out[#out + 1] = 0
    out[#out + 1] = 0
  else
    local s, K = window(KEYS[i], a)
    local I = tonumber(ARGV[a + 2]) * 1000
    if s then I = s.I end
    local res, x, rem, stamp, left, reset, own = I, 0, 0, 0, -1, 0, 0
    if s and (op == '1' or op == '4') then
      local ok, m = plan(s, K, tonumber(ARGV[a + 1]))
      if ok then res = 0 else res = math.max(1, m) end
      if ok and op == '4' then left, reset = leftOf(s, K, I) end
    elseif s and op == '2' then
      charge(s, K, tonumber(ARGV[a + 1]))
      res = 0
    elseif s then
      local demand = tonumber(ARGV[a + 4])
      local ok, m, f2, fill = plan(s, K, tonumber(ARGV[a + 1]))
      if ok then
        res = 0
        own = math.max(now, s.tn)
        add(s, m, f2, fill, own)
        -- far from the count only: the caller alone would fill at most half
        -- the window in an interval, and it stays at most half full
        if demand > 0 and 2 * demand * I <= K * 1000000 then
          -- as long as K/SPAN tokens take at the caller's rate or the
          -- window's (over the interval, and over its last 64th), at most
          -- I/40: what leases hold back stays small
          local rate = math.max(demand, since(s, now - I) * 1000000 / I,
            since(s, now - math.floor(I / 64)) * 64000000 / I)
          local L = math.floor(math.min(I / 40, K * 1000000 / (SPAN * 2 * rate)))
          x = math.floor(demand * L / 1000000)
          local ok2, m2, f3, fill2 = false
          if x > 0 then ok2, m2, f3, fill2 = plan(s, math.floor(K / 2), x) end
          if ok2 then
            stamp = math.max(now + L, s.tn)
            add(s, m2, f3, fill2, stamp)
            rem = stamp - now
          else
            x = 0
          end
        end
        if op == '3' then left, reset = leftOf(s, K, I) end
      else
        res = math.max(1, m)
      end
    end
    out[#out + 1] = res
    out[#out + 1] = x
    out[#out + 1] = rem
    out[#out + 1] = stamp
    out[#out + 1] = left
    out[#out + 1] = reset
    out[#out + 1] = own
  end
end
for _, k in ipairs(order) do
  local s = st[k]
  if s.dirty then flush(s) end
end
return out
`

// beatSrc announces a gateway: KEYS[1] gateway set, KEYS[2] the lift
// counter (ForgetParam), ARGV[1] gateway id, ARGV[2] expiry ms. The set
// itself expires when every gateway is gone. Returns the live gateways and
// the instant (Redis ms) they were counted, the reading a gateway passes to
// avgLocal windows, and the lift counter (0 before the first lift), which
// expires with the set: no key of a namespace outlives its gateways.
const beatSrc = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - exp)
redis.call('PEXPIRE', KEYS[1], exp * 2)
redis.call('PEXPIRE', KEYS[2], exp * 2)
return {redis.call('ZCARD', KEYS[1]), now, tonumber(redis.call('GET', KEYS[2]) or '0')}
`

// countSrc reads the live gateways between heartbeats, writing nothing:
// KEYS[1] gateway set, ARGV[1] expiry ms. Returns them and the instant
// (Redis ms) as beatSrc does.
const countSrc = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {redis.call('ZCOUNT', KEYS[1], '(' .. (now - tonumber(ARGV[1])), '+inf'), now}
`

// readSrc reads one param window for an operator, writing nothing: KEYS[1]
// the window, ARGV[1] its interval in ms. Returns the tokens in the window
// now and the µs until its oldest pass leaves (0: none in it); an absent
// window is empty.
const readSrc = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local raw = redis.call('GET', KEYS[1])
if not raw or #raw < 80 then return {0, 0} end
local K, g, S, h, f = struct.unpack('<ddddd', raw)
local I = tonumber(ARGV[1]) * 1000
local used, oldest = 0, -1
for j = 0, S - 1 do
  local i = (h + j) % S
  if #raw >= 80 + i * 8 + 8 then
    local v = struct.unpack('<d', raw, 80 + i * 8 + 1)
    if v > now - I then
      local c = g
      if j == S - 1 then c = f end
      used = used + c
      if oldest < 0 then oldest = v end
    end
  end
end
local wait = 0
if oldest >= 0 then wait = math.max(0, math.floor(oldest + I - now)) end
return {used, wait}
`

// scripts are immutable once built; Service holds its own so that no
// package state exists.
type scripts struct {
	acquire, beat, count, read *redis.Script
}

func newScripts() scripts {
	return scripts{acquire: redis.NewScript(acquireSrc), beat: redis.NewScript(beatSrc), count: redis.NewScript(countSrc), read: redis.NewScript(readSrc)}
}
