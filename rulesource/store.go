package rulesource

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice/config"
)

// ErrConflict is returned (wrapped in a *ConflictError) by Push when the
// stored version is not the one the write was based on.
var ErrConflict = errors.New("rulesource: the document changed since it was read")

// ConflictError says which version is stored now.
type ConflictError struct {
	BasedOn, Stored int64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("rulesource: the write was based on version %d, but version %d is stored; pull it and write again", e.BasedOn, e.Stored)
}

// Is makes errors.Is(err, ErrConflict) hold.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// DataError is a key whose contents are not a rules document (another type,
// a version that is not a number, a document too large). Redis answered: the
// source is reachable, its data is wrong.
type DataError struct{ Msg string }

func (e *DataError) Error() string { return "rulesource: " + e.Msg }

// Doc is one version of the document. Version 0 means the key holds none.
type Doc struct {
	Version  int64
	Text     []byte
	PushedAt time.Time // when Push stored it, by Redis's clock; zero if unknown
	// PushID is the random id of the write that stored it ("": written by
	// hand, or unknown). It tells a key rebuilt from scratch, whose
	// version counts from 1 again, from the version it replaced.
	PushID string
}

// SHA is the hex SHA-256 of the text, which tells two documents of the same
// version apart (a key rebuilt from scratch counts its versions from 1 again).
func (d Doc) SHA() string {
	sum := sha256.Sum256(d.Text)
	return hex.EncodeToString(sum[:])
}

// Store is the document at one key of one Redis. It is safe for concurrent
// use; the client is the caller's, and so is closing it.
type Store struct {
	rdb      redis.UniversalClient
	key      string
	channel  string
	push     *redis.Script
	lastSeen atomic.Int64 // Unix ns of the last answer from Redis; 0: none yet
}

// New returns the store of key in rdb.
func New(rdb redis.UniversalClient, key string) *Store {
	return &Store{rdb: rdb, key: key, channel: key + ":changed", push: redis.NewScript(pushScript)}
}

// Key is the Redis key of the document.
func (s *Store) Key() string { return s.key }

// LastSeen is when Redis last answered this store (any call, the watcher's
// polls included); zero if it never has.
func (s *Store) LastSeen() time.Time {
	if ns := s.lastSeen.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// seen records an answer from Redis: a reply, or a server error reply (the
// server is up, the request was wrong). Network errors are no answer.
func (s *Store) seen(err error) {
	if err == nil || err == redis.Nil || isReply(err) {
		s.lastSeen.Store(time.Now().UnixNano())
	}
}

// isReply reports whether err is an error reply from the server, which means
// Redis is reachable; states in which it cannot serve count as unreachable.
func isReply(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	for _, p := range []string{"LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY", "READONLY"} {
		if strings.HasPrefix(re.Error(), p) {
			return false
		}
	}
	return true
}

// pushScript stores the next version if the stored one is ARGV[1].
// KEYS[1]: the document hash. ARGV: basedOn, text, channel, push id.
// Returns {1, version, pushedAt ms} or {0, stored version}. The push id
// makes a try that the client sends again (its answer came after the read
// timeout) report the version the first try stored, not a conflict.
const pushScript = `
local v = redis.call('HGET', KEYS[1], 'version')
local cur = 0
if v then
  cur = tonumber(v)
  if cur == nil or cur < 0 or cur ~= math.floor(cur) then
    return redis.error_reply('ERR sluice: the version field of ' .. KEYS[1] .. ' is not a number >= 0: ' .. v)
  end
end
if cur ~= tonumber(ARGV[1]) then
  if cur == tonumber(ARGV[1]) + 1 and redis.call('HGET', KEYS[1], 'pushId') == ARGV[4] then
    return {1, cur, tonumber(redis.call('HGET', KEYS[1], 'pushedAt')) or 0}
  end
  return {0, cur}
end
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local next = cur + 1
redis.call('HSET', KEYS[1], 'version', next, 'doc', ARGV[2], 'pushedAt', ms, 'pushId', ARGV[4])
-- A publication refused (an ACL user without the channel) must not fail a
-- write already made; the watchers' poll finds the version instead.
redis.pcall('PUBLISH', ARGV[3], next)
return {1, next, ms}
`

// Push stores text as the next version if the stored version is basedOn (0:
// the key holds no document yet), and tells every watcher. It returns the
// new version, or a *ConflictError (errors.Is ErrConflict) when another
// writer came first; then nothing is stored. Push does not validate text.
func (s *Store) Push(ctx context.Context, text []byte, basedOn int64) (Doc, error) {
	if len(text) > config.MaxDocumentBytes {
		return Doc{}, errors.New("rulesource: " + config.TooLarge("the document", int64(len(text))))
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	res, err := s.push.Run(ctx, s.rdb, []string{s.key}, basedOn, text, s.channel, hex.EncodeToString(id[:])).Int64Slice()
	s.seen(err)
	if err != nil {
		if isReply(err) {
			return Doc{}, &DataError{Msg: strings.TrimPrefix(err.Error(), "ERR sluice: ")}
		}
		return Doc{}, fmt.Errorf("rulesource: push to %s: %w", s.key, err)
	}
	if len(res) < 2 || res[0] != 1 {
		stored := int64(0)
		if len(res) >= 2 {
			stored = res[1]
		}
		return Doc{}, &ConflictError{BasedOn: basedOn, Stored: stored}
	}
	return Doc{Version: res[1], Text: text, PushedAt: time.UnixMilli(res[2]), PushID: hex.EncodeToString(id[:])}, nil
}

// Pull reads the stored document; Version 0 means the key holds none. A
// document over config.MaxDocumentBytes is a *DataError, found from its
// length (HSTRLEN) before it is read.
func (s *Store) Pull(ctx context.Context) (Doc, error) {
	size, err := s.rdb.HStrLen(ctx, s.key, "doc").Result()
	s.seen(err)
	if err != nil {
		return Doc{}, s.readErr(err)
	}
	if size > config.MaxDocumentBytes {
		return Doc{}, s.tooLarge(size)
	}
	vals, err := s.rdb.HMGet(ctx, s.key, "version", "doc", "pushedAt", "pushId").Result()
	s.seen(err)
	if err != nil {
		return Doc{}, s.readErr(err)
	}
	v, err := parseVersion(s.key, vals[0])
	if err != nil || v == 0 {
		return Doc{}, err
	}
	text, _ := vals[1].(string)
	if len(text) > config.MaxDocumentBytes {
		// Written between the two reads by something other than Push.
		return Doc{}, s.tooLarge(int64(len(text)))
	}
	d := Doc{Version: v, Text: []byte(text)}
	d.PushID, _ = vals[3].(string)
	if ms, err := strconv.ParseInt(fmt.Sprint(vals[2]), 10, 64); err == nil {
		d.PushedAt = time.UnixMilli(ms)
	}
	return d, nil
}

// Version reads only the stored version (0: no document), as stamp does.
func (s *Store) Version(ctx context.Context) (int64, error) {
	v, _, err := s.stamp(ctx)
	return v, err
}

// stamp reads the stored version and the id of the write that stored it:
// the watcher's cheap poll, which also sees a key rebuilt to the version
// it knew.
func (s *Store) stamp(ctx context.Context) (int64, string, error) {
	vals, err := s.rdb.HMGet(ctx, s.key, "version", "pushId").Result()
	s.seen(err)
	if err != nil {
		return 0, "", s.readErr(err)
	}
	v, err := parseVersion(s.key, vals[0])
	if err != nil {
		return 0, "", err
	}
	id, _ := vals[1].(string)
	return v, id, nil
}

func (s *Store) tooLarge(size int64) error {
	return &DataError{Msg: config.TooLarge("the document at "+s.key, size)}
}

func (s *Store) readErr(err error) error {
	if isReply(err) {
		return &DataError{Msg: fmt.Sprintf("reading %s: %v", s.key, err)}
	}
	return fmt.Errorf("rulesource: reading %s: %w", s.key, err)
}

func parseVersion(key string, v any) (int64, error) {
	if v == nil {
		return 0, nil
	}
	s, _ := v.(string)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, &DataError{Msg: fmt.Sprintf("the version field of %s is not a number >= 0: %q", key, s)}
	}
	return n, nil
}
