// Package rulesource keeps a fleet's shared rules document in Redis: one
// versioned document that every gateway naming the key applies, written with
// compare-and-set so that no write is lost (docs/fleet.md).
//
// The document lives in a hash at the key: version (1, 2, ... in the order
// of the writes), doc (the YAML text) and pushedAt (Redis's clock, Unix ms).
// Push is a Lua script that writes the next version only if the stored one is
// the version the writer read, and publishes the new version on the key's
// channel (KEY + ":changed"). A Watcher applies a new version within a
// second: the publication wakes it at once, and a poll of the version field
// (a few bytes, every 250ms) catches a lost message or a write that did not
// publish. After Redis was unreachable the whole document is read again and
// compared by its hash, so a key rebuilt behind the gateways' back is seen.
//
// The package knows nothing of HTTP or of the rules' schema: it moves bytes
// and versions. Validation is the caller's (config), before Push and after
// each delivery; a Cache keeps the last document that validated on disk for
// a gateway that starts while Redis is down.
//
// Heartbeats (Beat, Fleet) let an operator see every gateway that applies
// the document: each gateway writes its own entry every second; entries older
// than three seconds are not listed.
//
// Layer 5 of docs/architecture.md: it imports config and internal/ mechanisms.
package rulesource
