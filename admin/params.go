package admin

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"sluice/config"
	"sluice/hotparam"
)

// topValues is how many values per param rule GET /api/params lists.
const topValues = 100

// liftTimeout bounds a lift's wait for the cluster's Redis.
const liftTimeout = 5 * time.Second

// ParamsFunc reports the param rules of resource now: with no values, each
// rule's top values (at most top) by blocks in the last minute; else the
// figures of values, without taking a token. ok is false for a resource
// that no route or API group has.
type ParamsFunc func(resource string, values []string, top int) (rules []hotparam.RuleState, ok bool)

// LiftFunc forgets value in every param rule of resource (and in the
// cluster for clusterMode rules). ok is false for a resource that no route
// or API group has.
type LiftFunc func(ctx context.Context, resource, value string) (l Lifted, ok bool, err error)

// Lifted is what a lift did: how many param rules tracked the value, and
// whether one of the resource's rules reads a credential
// (config.Key.Credential), whose value the log then leaves out.
type Lifted struct {
	Rules      int
	Credential bool
}

// PartitionKeyFunc is the pk a RateLimit-Policy item of value carries.
type PartitionKeyFunc func(value string) string

// paramsJSON is the body of GET /api/params.
type paramsJSON struct {
	At       int64           `json:"at"`
	Resource string          `json:"resource"`
	Rules    []paramRuleJSON `json:"rules"`
}

type paramRuleJSON struct {
	Rule    int               `json:"rule"` // its place among the resource's param rules, from 0
	Config  *config.ParamRule `json:"config"`
	Tracked int               `json:"tracked"`
	// Masked: the rule reads a credential and the reader could not write,
	// so its values are listed without their bytes.
	Masked bool             `json:"masked"`
	Values []paramValueJSON `json:"values"`
}

// paramValueJSON is one value. Value is the value as sent, as a JSON string
// (bytes that are not UTF-8 read as U+FFFD there); ValueBase64 is its exact
// bytes, to lift it by. A value longer than 64 bytes is tracked by a digest
// and listed as its first bytes, "…#" and the digest (Digest); it is lifted
// by that, or by its whole value (the only way to reach the cluster's
// window of it). PK is the partition key the value's RateLimit-Policy
// items carry ("" for a digest's, which hashes the whole value), so that a
// client's header can be matched with a value that is masked: a masked
// value's Value is "" (a digest's: "…#" and the digest) and ValueBase64
// is "".
type paramValueJSON struct {
	Value        string  `json:"value"`
	PK           string  `json:"pk"`
	ValueBase64  string  `json:"valueBase64"`
	UTF8         bool    `json:"utf8"`
	Digest       bool    `json:"digest"`
	Tracked      bool    `json:"tracked"`
	Applies      bool    `json:"applies"`
	Passes       float64 `json:"passes"`
	Blocks       float64 `json:"blocks"`
	Remaining    float64 `json:"remaining"`
	NextTokenSec float64 `json:"nextTokenSec"`
	InFlight     int64   `json:"inFlight"`
	Count        float64 `json:"count"`
	// Cluster: remaining and nextTokenSec are the cluster's (a clusterMode
	// rule whose Redis answered), not this gateway's.
	Cluster bool `json:"cluster"`
}

// params serves GET /api/params?resource=R[&value=V...]: who is being
// limited now.
func (s *Server) params(w http.ResponseWriter, r *http.Request) {
	q, ok := paramsQuery(w, r)
	if !ok {
		return
	}
	res := q.Get("resource")
	if res == "" {
		writeError(w, http.StatusBadRequest, "admin: /api/params needs ?resource=")
		return
	}
	if len(q["value"]) > topValues {
		// Each value asked for is a read per rule, in Redis for a
		// clusterMode rule: a 56 KB query of 5,200 values made 31,000
		// Redis commands, on an endpoint anyone who can read may call.
		writeError(w, http.StatusBadRequest, "admin: /api/params takes at most "+strconv.Itoa(topValues)+" &value=, got "+strconv.Itoa(len(q["value"])))
		return
	}
	rules, ok := s.opts.Params(res, q["value"], topValues)
	if !ok {
		writeError(w, http.StatusNotFound, "admin: no route or API group has resource "+strconv.Quote(res))
		return
	}
	// A rule that reads credentials (an API key, a session cookie) would
	// hand them to anyone who can read, which the admin API lets more
	// peers do than write: its values go to a reader who could write.
	writer := s.mayWrite(r)
	out := paramsJSON{At: s.opts.Now().UnixMilli(), Resource: res, Rules: make([]paramRuleJSON, len(rules))}
	for i, rs := range rules {
		masked := !writer && rs.Rule != nil && rs.Rule.Param.Credential()
		pr := paramRuleJSON{Rule: rs.Ord, Config: rs.Rule, Tracked: rs.Tracked, Masked: masked, Values: make([]paramValueJSON, len(rs.Values))}
		if masked {
			pr.Config, _ = rs.Rule.WithoutCredentials()
			if len(q["value"]) > 0 {
				// A guess's figures say whether a key is in use, and
				// its pk which origin it is: no answer to a guess.
				pr.Values = pr.Values[:0]
			}
		}
		for j, v := range rs.Values[:len(pr.Values)] {
			pv := paramValueJSON{
				Value: v.Value, ValueBase64: base64.StdEncoding.EncodeToString([]byte(v.Value)),
				UTF8: utf8.ValidString(v.Value), Digest: v.Digest, Tracked: v.Tracked, Applies: v.Applies,
				Passes: v.Passes, Blocks: v.Blocks, Remaining: v.Remaining,
				NextTokenSec: v.NextToken.Seconds(), InFlight: v.InFlight, Count: v.Count, Cluster: v.Shared,
			}
			if !v.Digest {
				pv.PK = s.opts.PartitionKey(v.Value)
			}
			if masked {
				pv.Value, pv.ValueBase64, pv.UTF8 = "", "", true
				if v.Digest {
					pv.Value = v.Value[strings.LastIndex(v.Value, "…#"):]
				}
			}
			pr.Values[j] = pv
		}
		out.Rules[i] = pr
	}
	writeJSON(w, http.StatusOK, out)
}

// paramsQuery is /api/params's query, or a 400 for one that does not parse:
// a malformed escape (value=%zz) would be left out silently, and the
// caller sent the top list, or lifted nothing, in its place.
func paramsQuery(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "admin: /api/params: a malformed query ("+err.Error()+"); percent-encode every byte of a value as %XX")
		return nil, false
	}
	return q, true
}

// liftParam serves DELETE /api/params?resource=R&value=V: V starts afresh
// in every param rule of R. A write: behind requireToken.
func (s *Server) liftParam(w http.ResponseWriter, r *http.Request) {
	q, ok := paramsQuery(w, r)
	if !ok {
		return
	}
	res := q.Get("resource")
	vals, has := q["value"]
	switch {
	case res == "":
		writeError(w, http.StatusBadRequest, "admin: DELETE /api/params needs ?resource=")
		return
	case !has || len(vals) != 1:
		writeError(w, http.StatusBadRequest, "admin: DELETE /api/params needs exactly one &value= (percent-encode any byte)")
		return
	}
	val := vals[0]
	ctx, cancel := context.WithTimeout(r.Context(), liftTimeout)
	defer cancel()
	l, ok, err := s.opts.LiftParam(ctx, res, val)
	if !ok {
		writeError(w, http.StatusNotFound, "admin: no route or API group has resource "+strconv.Quote(res))
		return
	}
	ev := s.opts.Log.Info()
	if err != nil {
		ev = s.opts.Log.Warn().Err(err)
	}
	// The value as sent (zerolog escapes it as a JSON string), but not a
	// credential's, which the log's readers need not hold: its pk, as the
	// client's RateLimit-Policy carries it.
	ev = ev.Str("remote", r.RemoteAddr).Str("resource", res)
	if l.Credential {
		ev = ev.Str("pk", s.opts.PartitionKey(val))
	} else {
		ev = ev.Str("value", val)
	}
	ev.Int("rules", l.Rules).Msg("admin: param value lifted")
	if err != nil {
		writeError(w, http.StatusBadGateway, "admin: lifted on this gateway; the cluster's state was not cleared: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Resource string `json:"resource"`
		Value    string `json:"value"`
		Rules    int    `json:"rules"` // rules that tracked the value
	}{res, val, l.Rules})
}
