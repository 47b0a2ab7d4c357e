package admin

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
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
// cluster for clusterMode rules); rules is how many rules tracked it. ok is
// false for a resource that no route or API group has.
type LiftFunc func(ctx context.Context, resource, value string) (rules int, ok bool, err error)

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
	Values  []paramValueJSON  `json:"values"`
}

// paramValueJSON is one value. Value is the value as sent, as a JSON string
// (bytes that are not UTF-8 read as U+FFFD there); ValueBase64 is its exact
// bytes, to lift it by. A value longer than 64 bytes is tracked by a digest
// and listed as its first bytes, "…#" and the digest (Digest); it is lifted
// by that, or by its whole value (the only way to reach the cluster's
// window of it).
type paramValueJSON struct {
	Value        string  `json:"value"`
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
	rules, ok := s.opts.Params(res, q["value"], topValues)
	if !ok {
		writeError(w, http.StatusNotFound, "admin: no route or API group has resource "+strconv.Quote(res))
		return
	}
	out := paramsJSON{At: s.opts.Now().UnixMilli(), Resource: res, Rules: make([]paramRuleJSON, len(rules))}
	for i, rs := range rules {
		pr := paramRuleJSON{Rule: rs.Ord, Config: rs.Rule, Tracked: rs.Tracked, Values: make([]paramValueJSON, len(rs.Values))}
		for j, v := range rs.Values {
			pr.Values[j] = paramValueJSON{
				Value: v.Value, ValueBase64: base64.StdEncoding.EncodeToString([]byte(v.Value)),
				UTF8: utf8.ValidString(v.Value), Digest: v.Digest, Tracked: v.Tracked, Applies: v.Applies,
				Passes: v.Passes, Blocks: v.Blocks, Remaining: v.Remaining,
				NextTokenSec: v.NextToken.Seconds(), InFlight: v.InFlight, Count: v.Count, Cluster: v.Shared,
			}
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
	n, ok, err := s.opts.LiftParam(ctx, res, val)
	if !ok {
		writeError(w, http.StatusNotFound, "admin: no route or API group has resource "+strconv.Quote(res))
		return
	}
	ev := s.opts.Log.Info()
	if err != nil {
		ev = s.opts.Log.Warn().Err(err)
	}
	// The value as sent: the operator's log, like the admin API, may show it
	// (zerolog escapes it as a JSON string).
	ev.Str("remote", r.RemoteAddr).Str("resource", res).Str("value", val).Int("rules", n).
		Msg("admin: param value lifted")
	if err != nil {
		writeError(w, http.StatusBadGateway, "admin: lifted on this gateway; the cluster's state was not cleared: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Resource string `json:"resource"`
		Value    string `json:"value"`
		Rules    int    `json:"rules"` // rules that tracked the value
	}{res, val, n})
}
