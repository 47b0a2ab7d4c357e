// Package admin serves sluice's operators' listener: health and readiness
// probes, Prometheus metrics, a JSON API over the rules in force and the live
// per-resource statistics, and an embedded dashboard with a rule editor that
// saves to rules.yaml.
//
// # Endpoints
//
//	GET  /healthz                          200 "ok" while the process runs
//	GET  /readyz                           200 once rules are loaded, else 503
//	GET  /metrics                          Prometheus text exposition
//	GET  /api/rules                        rules in force, source file, last reload result
//	GET  /api/rules/raw                    rules.yaml as text, its rules as JSON, and its ETag
//	GET  /api/resources[?origins=N|all]    per resource now: pass/block/success/error qps, avg rt, concurrency, per entrance, and the 50 (N) most active origins
//	GET  /api/history                      per-second samples of the last 5 minutes per resource
//	PUT  /api/rules/{section}/{index}      edit one rule of routes|apiGroups|authorityRules|flowRules|paramRules|degradeRules (needs If-Match)
//	POST /api/reload                       ask for a reload of rules.yaml now
//	GET  /                                 the dashboard
//
// # Metrics
//
//	sluice_requests_total{resource,result}            counter; result is pass, block or error
//	sluice_blocked_total{resource,reason}             counter; reason is flow, param, degrade, system, authority or dryrun
//	sluice_request_duration_seconds{resource,result}  histogram, 0.5 ms to 10 s
//	sluice_concurrency{resource}                      gauge, read from the limiter at scrape time
//	sluice_rules_reloads_total{result}                counter; result is ok or failed
//	sluice_rules_last_reload_success_timestamp_seconds gauge
//	sluice_circuit_state{resource}                    gauge; 0 closed, 1 open, 2 half-open
//	sluice_cluster_redis_up{form,master}              gauge per master node; 1 when it answers
//	sluice_cluster_unanswered_total{cause}            counter; cluster calls Redis did not decide (down, timeout, error)
//
// The resource label only takes names from the configuration (Metrics.Resource
// is called when a rules snapshot is built), so requests cannot add series.
//
// # Security
//
// The admin listener binds 127.0.0.1 by default, so only local processes reach
// it. Reads are open to whoever can connect. When Options.Token is set (from
// admin.token or SLUICE_ADMIN_TOKEN), every write (PUT, POST) needs the header
// "Authorization: Bearer <token>"; without it, or with a wrong one, the answer
// is 401. The token is compared in constant time. Without a token, writes are
// accepted only when the request's Host is a loopback name or address
// (localhost, 127.0.0.1, [::1]); anything else is 403, which defeats DNS
// rebinding and makes a listener opened to the network without a token
// read-only. Writes that carry an Origin header naming another host are
// refused with 403, so a web page open in the operator's browser cannot post
// to the local listener. Secrets in rules.yaml (admin.token, a password in
// cluster.redis) are masked in GET /api/rules/raw. Expose the listener on
// other interfaces only with a token set, and preferably behind TLS.
//
// # Rule editor
//
// An edit names one rule by section and index, and carries the ETag of the
// rules.yaml it was based on in If-Match. The server re-reads the file; if it
// changed since (its hash differs) the edit is refused with 409 and nothing is
// written. Otherwise only the lines of that rule are replaced (the rest of the
// file, comments included, stays byte for byte), the whole new file is checked
// with Options.Validate (422 with the error lines and the file untouched if it
// fails), written atomically (temporary file in the same directory, fsync,
// rename, same file mode), and Options.Reload is asked to apply it.
//
// Layer 5 of docs/architecture.md: it imports config and internal/ mechanisms;
// what it shows of the gateway reaches it through Options, from package lifecycle.
package admin
