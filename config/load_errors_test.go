package config_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"sluice/config"
)

// TestLoadErrors loads one file per mistake and asserts every message exactly,
// file:line and field path included.
func TestLoadErrors(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"alias_bomb.yaml", []string{
			"testdata/alias_bomb.yaml:2: m: unknown field",
			"testdata/alias_bomb.yaml:2: routes[99].methods[599]: aliases expand to over 100000 values; write the settings out instead",
			"testdata/alias_bomb.yaml:3: r: unknown field",
		}},
		{"api_groups.yaml", []string{
			"testdata/api_groups.yaml:12: apiGroups[0].match[1].regex: invalid regexp: missing closing ]: `[0-9+/orders`",
			"testdata/api_groups.yaml:13: apiGroups[0].match[2].exact: must be a path starting with \"/\", got \"cart\"",
			"testdata/api_groups.yaml:14: apiGroups[0].match[3]: must set exactly one of exact, prefix and regex",
			"testdata/api_groups.yaml:15: apiGroups[0].match[4]: must set exactly one of exact, prefix and regex",
			"testdata/api_groups.yaml:16: apiGroups[0].match[5].regex: must not be empty (it would match every path: use { prefix: / })",
			"testdata/api_groups.yaml:17: apiGroups[0].match[6].prefix: must be a path without a query or fragment (groups match the path alone), got \"/x?y=1\"",
			"testdata/api_groups.yaml:18: apiGroups[1].name: duplicate API group \"orders-api\" (also apiGroups[0], line 9)",
			"testdata/api_groups.yaml:20: apiGroups[2].name: \"get-order\" is already a route's resource (routes[0], line 5): a group needs a name of its own",
			"testdata/api_groups.yaml:23: apiGroups[3].match: must list at least one of { exact: PATH }, { prefix: PATH }, { regex: RE2 }",
			"testdata/api_groups.yaml:24: apiGroups[4].name: is required (the resource name rules use for the group)",
			"testdata/api_groups.yaml:28: flowRules[1].resource: unknown resource \"order-api\": no route or API group has it (resources: empty, get-order, orders-api)",
		}},
		{"bad_block_response.yaml", []string{
			"testdata/bad_block_response.yaml:8: blockResponse.status: must be an HTTP error status in 400..599, got 200",
			"testdata/bad_block_response.yaml:9: blockResponse.body: template uses {{.Error}}; only {{.Resource}} and {{.Reason}} are available",
		}},
		{"bad_enum.yaml", []string{
			"testdata/bad_enum.yaml:2: log.level: must be one of trace, debug, info, warn, error, got \"verbose\"",
			"testdata/bad_enum.yaml:9: routes[0].forwarder: must be one of auto, standard, fast, got \"turbo\"",
			"testdata/bad_enum.yaml:13: flowRules[0].grade: must be one of qps, concurrency, got \"qpss\"",
			"testdata/bad_enum.yaml:14: flowRules[0].strategy: must be one of direct, relate, chain, got \"Direct\"",
			"testdata/bad_enum.yaml:15: flowRules[0].controlBehavior: must be one of reject, warmUp, throttle, warmUpThrottle, got \"warmup\"",
		}},
		{"bad_hosts.yaml", []string{
			"testdata/bad_hosts.yaml:8: routes[0].hosts[0]: must not have a port (the request's port is ignored when matching): write \"shop.example.com\"",
			"testdata/bad_hosts.yaml:9: routes[0].hosts[1]: a wildcard must be the first label, as in *.example.com, got \"*\"",
			"testdata/bad_hosts.yaml:10: routes[0].hosts[2]: a wildcard must be the first label, as in *.example.com, got \"a.*.example.com\"",
			"testdata/bad_hosts.yaml:11: routes[0].hosts[3]: must be dot-separated labels of 1 to 63 characters (a name like shop.example.com, or *.example.com), got \"shop..example.com\"",
			"testdata/bad_hosts.yaml:12: routes[0].hosts[4]: may hold only letters, digits, '-' and '_' between dots (a name like shop.example.com, or *.example.com), got \"shop example.com\"",
			"testdata/bad_hosts.yaml:13: routes[0].hosts[5]: must not be empty (a name like shop.example.com, or *.example.com)",
			"testdata/bad_hosts.yaml:15: routes[0].hosts[7]: duplicate host \"shop.example.com\" (also hosts[6])",
			"testdata/bad_hosts.yaml:16: routes[0].hosts[8]: must be a host name, not a URL: write \"api.example.com\" (without https://)",
			"testdata/bad_hosts.yaml:20: routes[2].path: duplicate route: /a is already served by routes[1] (line 17)",
		}},
		{"bad_admin_hosts.yaml", []string{
			"testdata/bad_admin_hosts.yaml:5: admin.hosts[1]: must not have a port (the request's port is ignored when matching): write \"gateway-1.internal\"",
			"testdata/bad_admin_hosts.yaml:7: admin.hosts[3]: a wildcard must be the first label, as in *.example.com, got \"admin.*.example.com\"",
			"testdata/bad_admin_hosts.yaml:8: admin.hosts[4]: duplicate host \"gateway-1.internal\" (also hosts[0])",
			"testdata/bad_admin_hosts.yaml:9: admin.hosts[5]: must not be empty (a name like shop.example.com, or *.example.com)",
			"testdata/bad_admin_hosts.yaml:10: admin.hosts[6]: a label must not start or end with '-' (a name like shop.example.com, or *.example.com), got \"-gateway.internal\"",
		}},
		{"bad_listen.yaml", []string{
			"testdata/bad_listen.yaml:1: listen: must be host:port or :port, got \"8080\"",
			"testdata/bad_listen.yaml:3: admin.listen: must be host:port or :port, got \"localhost\"",
		}},
		{"listen_bad_port.yaml", []string{
			"testdata/listen_bad_port.yaml:1: listen: the port must be a number in 0..65535 or a service name, got \":99999\"",
			"testdata/listen_bad_port.yaml:3: admin.listen: the port must be a number in 0..65535 or a service name, got \"127.0.0.1:notaport\"",
		}},
		{"listen_clash.yaml", []string{
			"testdata/listen_clash.yaml:3: admin.listen: \"127.0.0.1:18080\" takes the port of listen (\":18080\", line 1): each listener needs its own port",
			"testdata/listen_clash.yaml:5: tls.listen: \"0.0.0.0:18080\" takes the port of listen (\":18080\", line 1): each listener needs its own port",
		}},
		{"bad_method.yaml", []string{
			"testdata/bad_method.yaml:6: routes[0].methods[1]: must be an HTTP method (GET, HEAD, POST, PUT, PATCH, DELETE, CONNECT, OPTIONS, TRACE), got \"FETCH\"",
			"testdata/bad_method.yaml:6: routes[0].methods[2]: duplicate method GET",
		}},
		{"bad_pattern.yaml", []string{
			"testdata/bad_pattern.yaml:5: routes[0].path: unbalanced braces: \"{\" at offset 7 is never closed",
			"testdata/bad_pattern.yaml:7: routes[1].path: must start with \"/\", got \"order\"",
			"testdata/bad_pattern.yaml:9: routes[2].path: the wildcard \"*\" must be the last character (use a {param} in the middle)",
			"testdata/bad_pattern.yaml:11: routes[3].path: duplicate parameter name \"x\"",
		}},
		{"bad_protocol.yaml", []string{
			"testdata/bad_protocol.yaml:3: upstreams.grpc.targets[0]: must be an http:// URL with protocol h2c, got \"https://127.0.0.1:9001\"",
			"testdata/bad_protocol.yaml:6: upstreams.secure.targets[0]: must be an https:// URL with protocol h2, got \"http://127.0.0.1:9003\"",
			"testdata/bad_protocol.yaml:10: upstreams.odd.protocol: must be one of http1, h2c, h2, got \"http2\"",
		}},
		{"bad_redis.yaml", []string{
			"testdata/bad_redis.yaml:8: cluster.redis: must be a redis://host:port/db URL, got \"http://127.0.0.1:6379\"",
		}},
		{"bad_regexp.yaml", []string{
			"testdata/bad_regexp.yaml:5: routes[0].path: parameter {id}: invalid regexp: missing closing ]: `[0-9+`",
		}},
		{"bad_route_fields.yaml", []string{
			"testdata/bad_route_fields.yaml:7: routes[0].resource: must not be empty (leave it out to use the path)",
			"testdata/bad_route_fields.yaml:8: routes[0].entrance: must not be empty (leave it out to use \"default\")",
			"testdata/bad_route_fields.yaml:9: routes[0].stripPrefix: must start with \"/\", got \"api\"",
			"testdata/bad_route_fields.yaml:10: routes[0].acquireCount: must be > 0, got 0",
			"testdata/bad_route_fields.yaml:11: routes[1].upstream: is required",
			"testdata/bad_route_fields.yaml:12: routes[1].methods: must not be empty (leave it out to allow every method)",
			"testdata/bad_route_fields.yaml:13: routes[2].path: parameters must be separated by text, got \"}{\" at offset 5",
			"testdata/bad_route_fields.yaml:15: routes[3].path: parameter {:[0-9]+} has no name",
		}},
		{"bad_prioritized.yaml", []string{
			`testdata/bad_prioritized.yaml:7: routes[0].prioritized: invalid prioritized "header:X-Priority" (want true, false or "SOURCE=VALUE", e.g. "header:X-Priority=high")`,
			"testdata/bad_prioritized.yaml:8: routes[0].occupyTimeoutMs: must be in 1..60000, got 0",
			`testdata/bad_prioritized.yaml:11: routes[1].prioritized: path parameter "other" is not in the route's path "/b/{id}"`,
			"testdata/bad_prioritized.yaml:12: routes[1].occupyTimeoutMs: must be in 1..60000, got 60001",
			`testdata/bad_prioritized.yaml:15: routes[2].prioritized: invalid prioritized "heder:X=1": invalid source "heder:X": unknown kind "heder" (want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip)`,
			`testdata/bad_prioritized.yaml:18: routes[3].prioritized: expected true, false or a string, got a list (want true, false or "SOURCE=VALUE", e.g. "header:X-Priority=high")`,
		}},
		{"bad_source.yaml", []string{
			"testdata/bad_source.yaml:2: origin.from: invalid source \"heder:X-Origin\": unknown kind \"heder\" (want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip)",
			"testdata/bad_source.yaml:11: paramRules[0].param: invalid source \"query:\": missing name after \"query:\" (want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip)",
			"testdata/bad_source.yaml:14: paramRules[1].param: invalid source \"ip:x\": ip takes no name (want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip)",
			`testdata/bad_source.yaml:17: paramRules[2].param: invalid source "query: id": query name " id" must not start or end with a space, nor hold a tab, "=", "&" or "#" (query:id reads ?id=1) (want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip)`,
			`testdata/bad_source.yaml:20: paramRules[3].param: invalid source "query:a=b": query name "a=b" must not start or end with a space, nor hold a tab, "=", "&" or "#" (query:id reads ?id=1) (want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip)`,
		}},
		{"bad_system.yaml", []string{
			"testdata/bad_system.yaml:8: system.maxQps: must be >= 0, got -1",
			"testdata/bad_system.yaml:9: system.maxCpuUsage: must be between 0 and 1 (a fraction of all CPUs), got 80",
		}},
		{"bad_target.yaml", []string{
			"testdata/bad_target.yaml:3: upstreams.app.targets[0]: must be an absolute http:// or https:// URL with a host, got \"127.0.0.1:9001\"",
			"testdata/bad_target.yaml:3: upstreams.app.targets[1]: must be an absolute http:// or https:// URL with a host, got \"ftp://files\"",
			"testdata/bad_target.yaml:3: upstreams.app.targets[2]: must be an absolute http:// or https:// URL with a host, got \"http://\"",
			"testdata/bad_target.yaml:3: upstreams.app.targets[3]: the port must be a number in 1..65535, got \"http://127.0.0.1:99999\"",
			"testdata/bad_target.yaml:3: upstreams.app.targets[4]: the port must be a number in 1..65535, got \"http://127.0.0.1:0\"",
			"testdata/bad_target.yaml:3: upstreams.app.targets[5]: the port must be a number in 1..65535, got \"https://[::1]:65536\"",
			"testdata/bad_target.yaml:5: upstreams.empty.targets: at least one target is required",
			"testdata/bad_target.yaml:6: upstreams.empty.timeout: must be > 0, got 0s",
		}},
		{"bad_template.yaml", []string{
			"testdata/bad_template.yaml:8: blockResponse.body: invalid template: body:1: bad character U+007D '}'",
		}},
		{"bad_tls.yaml", []string{
			"testdata/bad_tls.yaml:3: tls.listen: must differ from listen (both are \":8443\")",
			"testdata/bad_tls.yaml:5: tls.certificates[0].certFile: is required (a PEM certificate chain)",
			"testdata/bad_tls.yaml:6: tls.certificates[1].keyFile: is required (the PEM private key of certFile)",
			"testdata/bad_tls.yaml:7: tls.minVersion: must be one of 1.2, 1.3, got \"1.1\"",
		}},
		{"bad_server.yaml", []string{
			"testdata/bad_server.yaml:2: server.readHeaderTimeout: must be > 0 and <= 1h, got 0s",
			"testdata/bad_server.yaml:3: server.idleTimeout: must be > 0 and <= 1h, got 2h0m0s",
			"testdata/bad_server.yaml:4: server.sendTimeout: must be > 0 and <= 1h, got -1s",
			"testdata/bad_server.yaml:5: server.maxConcurrentStreams: must be between 1 and 2147483647 (HTTP/2 streams one connection may have open), got 0",
			"testdata/bad_server.yaml:6: server.maxConnections: must be between 0 and 2147483647, got -1",
			"testdata/bad_server.yaml:7: server.maxConnectionsPerIP: must be between 0 and 2147483647, got 3000000000",
			"testdata/bad_server.yaml:8: server.upgrades[1]: h2c cannot be forwarded: the upgraded connection's streams would pass no route or rule (http2.h2c serves h2c itself)",
			"testdata/bad_server.yaml:8: server.upgrades[2]: must be an Upgrade token (websocket, SPDY/3.1), got \"web socket\"",
			"testdata/bad_server.yaml:8: server.upgrades[4]: must be an Upgrade token (websocket, SPDY/3.1), got \"tcp/\"",
		}},
		{"bad_route_block.yaml", []string{
			"testdata/bad_route_block.yaml:2: server.maxBodyBytes: must be >= 0, got -1",
			"testdata/bad_route_block.yaml:9: routes[0].maxBodyBytes: must be >= 0, got -5",
			"testdata/bad_route_block.yaml:11: routes[0].blockResponse.status: must be an HTTP error status in 400..599, got 302",
			"testdata/bad_route_block.yaml:12: routes[0].blockResponse.contentType: must not be empty",
			"testdata/bad_route_block.yaml:13: routes[0].blockResponse.body: template uses {{.Error}}; only {{.Resource}} and {{.Reason}} are available",
			"testdata/bad_route_block.yaml:14: routes[0].blockResponse.redirect: must be an absolute http:// or https:// URL or a path starting with \"/\", got \"ftp://example.com/down\"",
			"testdata/bad_route_block.yaml:18: routes[1].blockResponse.redirect: must be an absolute http:// or https:// URL or a path starting with \"/\", got \"//evil.example.com/x\"",
			"testdata/bad_route_block.yaml:19: routes[1].blockResponse.legacyHeaders: expected true or false, got \"yes please\"",
			"testdata/bad_route_block.yaml:23: routes[2].blockResponse.redirect: must be an absolute http:// or https:// URL or a path starting with \"/\", got \"down.html\"",
			"testdata/bad_route_block.yaml:24: routes[2].blockResponse.statuss: unknown field; did you mean \"status\"?",
			"testdata/bad_route_block.yaml:26: blockResponse.redirect: must be an absolute http:// or https:// URL or a path starting with \"/\", got \"https://example.com/a b\"",
		}},
		{"bad_server_types.yaml", []string{
			"testdata/bad_server_types.yaml:2: server.sendTimeout: expected a duration like \"30s\" or \"500ms\", got \"30\"",
			"testdata/bad_server_types.yaml:3: server.maxConcurrentStreams: must be between 1 and 2147483647 (HTTP/2 streams one connection may have open), got 3000000000",
			"testdata/bad_server_types.yaml:4: server.maxStreams: unknown field",
		}},
		{"bad_authority.yaml", []string{
			"testdata/bad_authority.yaml:12: authorityRules[0].strategy: must be one of white, black, got \"whitelist\"",
			"testdata/bad_authority.yaml:15: authorityRules[1].ips[0]: must be a CIDR (10.0.0.0/8) or an IP address, got \"10.0.0.0/33\"",
			"testdata/bad_authority.yaml:15: authorityRules[1].ips[5]: must be a CIDR (10.0.0.0/8) or an IP address, got \"localhost\"",
			"testdata/bad_authority.yaml:15: authorityRules[1].ips[6]: must be a CIDR (10.0.0.0/8) or an IP address, got \"1.2.3.4/\"",
			"testdata/bad_authority.yaml:16: authorityRules[2]: names no caller: set limitApp (origins), ips (client addresses) or both",
			"testdata/bad_authority.yaml:18: authorityRules[3]: names no caller: set limitApp (origins), ips (client addresses) or both",
			"testdata/bad_authority.yaml:21: authorityRules[4].resource: unknown resource \"nope\": no route has it (resources: a)",
			"testdata/bad_authority.yaml:23: authorityRules[4].ip: unknown field",
			"testdata/bad_authority.yaml:25: authorityRules[5].limitApp: lists origins; \"other\" is a flow rule's keyword, not an origin",
		}},
		{"authority_no_origin.yaml", []string{
			"testdata/authority_no_origin.yaml:10: authorityRules[0].limitApp: needs origin.from (where a call's origin comes from): without it no call has an origin",
		}},
		{"bad_trusted_proxies.yaml", []string{
			"testdata/bad_trusted_proxies.yaml:1: trustedProxies[1]: must be a CIDR (10.0.0.0/8) or an IP address, got \"10.0.0.0/33\"",
			"testdata/bad_trusted_proxies.yaml:1: trustedProxies[2]: must be a CIDR (10.0.0.0/8) or an IP address, got \"localhost\"",
		}},
		{"bad_yaml.yaml", []string{
			"testdata/bad_yaml.yaml:6: invalid YAML: did not find expected '-' indicator",
		}},
		{"chain_unknown_entrance.yaml", []string{
			"testdata/chain_unknown_entrance.yaml:17: flowRules[0].refResource: no route of resource \"read\" has entrance \"api\" (entrances: mobile, web)",
		}},
		{"cluster_no_redis.yaml", []string{
			"testdata/cluster_no_redis.yaml:11: flowRules[0].clusterMode: needs a Redis: set cluster.redis (a redis:// URL), cluster.sentinel or cluster.clusterAddrs",
			"testdata/cluster_no_redis.yaml:11: flowRules[0].clusterMode: needs grade qps, got \"concurrency\"",
			"testdata/cluster_no_redis.yaml:13: flowRules[0].clusterConfig.thresholdType: must be one of global, avgLocal, got \"local\"",
		}},
		{"param_cluster.yaml", []string{
			"testdata/param_cluster.yaml:12: paramRules[0].clusterMode: needs a Redis: set cluster.redis (a redis:// URL), cluster.sentinel or cluster.clusterAddrs",
			"testdata/param_cluster.yaml:12: paramRules[0].clusterMode: needs grade qps, got \"concurrency\"",
			"testdata/param_cluster.yaml:17: paramRules[1].burstCount: must be 0 with clusterMode (the cluster window passes at most count per durationSec), got 5",
			"testdata/param_cluster.yaml:18: paramRules[1].clusterMode: needs a Redis: set cluster.redis (a redis:// URL), cluster.sentinel or cluster.clusterAddrs",
			"testdata/param_cluster.yaml:18: paramRules[1].clusterMode: needs controlBehavior reject, got \"throttle\"",
			"testdata/param_cluster.yaml:19: paramRules[1].clusterConfig.thresholdType: must be one of global, avgLocal, got \"local\"",
		}},
		{"param_quota.yaml", []string{
			"testdata/param_quota.yaml:13: paramRules[0].window: \"day\" needs clusterMode: true (a calendar quota is kept in Redis, so that it outlives a restart and is shared by every gateway)",
			"testdata/param_quota.yaml:16: paramRules[1].count: must be a whole number for grade concurrency, got 2.5",
			"testdata/param_quota.yaml:18: paramRules[1].timezone: must be an IANA time zone name such as UTC, Europe/Berlin or America/New_York, got \"Mars/Olympus_Mons\"",
			"testdata/param_quota.yaml:19: paramRules[1].grade: must be qps with window \"month\" (a quota counts calls, not calls in flight), got \"concurrency\"",
			"testdata/param_quota.yaml:25: paramRules[2].timezone: must be an IANA time zone name such as UTC, Europe/Berlin or America/New_York, got \"Local\"",
			"testdata/param_quota.yaml:26: paramRules[2].controlBehavior: must be reject with window \"day\" (a call over the quota would queue until the reset), got \"throttle\"",
			"testdata/param_quota.yaml:27: paramRules[2].maxQueueingTimeMs: must be 0 with window \"day\" (nothing queues for a quota), got 500",
			"testdata/param_quota.yaml:28: paramRules[2].durationSec: has no meaning with window \"day\": the period is the calendar day in timezone",
			"testdata/param_quota.yaml:29: paramRules[2].burstCount: must be 0 with window \"day\" (a quota passes count per period, no more), got 5",
			"testdata/param_quota.yaml:31: paramRules[2].clusterConfig.thresholdType: must be global with window \"day\" (a quota is the fleet's total; avgLocal would change it with every gateway that comes or goes during the period)",
			"testdata/param_quota.yaml:33: paramRules[2].items[0].count: must be a whole number with window \"day\", got 1000.5",
			"testdata/param_quota.yaml:37: paramRules[3].timezone: applies only to window day or month (a calendar quota), and this rule's window is rolling",
			"testdata/param_quota.yaml:41: paramRules[4].window: must be one of rolling, day, month, got \"weekly\"",
			"testdata/param_quota.yaml:42: paramRules[4].timezone: must be an IANA time zone name such as UTC, Europe/Berlin or America/New_York, got \"\"",
		}},
		{"param_quota_no_redis.yaml", []string{
			"testdata/param_quota_no_redis.yaml:13: paramRules[0].clusterMode: needs a Redis: set cluster.redis (a redis:// URL), cluster.sentinel or cluster.clusterAddrs",
		}},
		{"comments_only.yaml", []string{
			"testdata/comments_only.yaml: file is empty (it holds only comments)",
		}},
		{"concurrency_throttle.yaml", []string{
			"testdata/concurrency_throttle.yaml:10: flowRules[0].count: must be a whole number for grade concurrency, got 2.5",
			"testdata/concurrency_throttle.yaml:11: flowRules[0].controlBehavior: must be reject with grade concurrency, got \"throttle\"",
		}},
		{"count_limits.yaml", []string{
			"testdata/count_limits.yaml:8: routes[0].acquireCount: must be <= 2147483648 (2^31), got 2147483649",
			"testdata/count_limits.yaml:12: flowRules[0].count: must be <= 2147483648 (2^31), got 3000000000",
			"testdata/count_limits.yaml:14: flowRules[1].count: must be <= 2147483648 (2^31), got 1e+300",
			"testdata/count_limits.yaml:19: paramRules[0].count: must be <= 2147483648 (2^31), got 10000000000000000000",
			"testdata/count_limits.yaml:20: paramRules[0].burstCount: must be <= 2147483648 (2^31), got 4294967296",
			"testdata/count_limits.yaml:22: paramRules[0].items[0].count: must be <= 2147483648 (2^31), got 10000000000000000000",
		}},
		{"degrade_per_resource.yaml", []string{
			"testdata/degrade_per_resource.yaml:137: degradeRules[128].resource: resource \"a\" has more than 64 degrade rules (the most one resource may have)",
		}},
		{"degrade_threshold.yaml", []string{
			"testdata/degrade_threshold.yaml:8: degradeRules[0].maxAllowedRtMs: must be > 0 with strategy slowRatio, got 0",
			"testdata/degrade_threshold.yaml:10: degradeRules[0].threshold: must be a ratio in (0, 1] with strategy slowRatio, got 1.5",
			"testdata/degrade_threshold.yaml:13: degradeRules[1].threshold: must be an error count >= 1 with strategy errorCount, got 0.5",
			"testdata/degrade_threshold.yaml:15: degradeRules[2].strategy: must be one of slowRatio, errorRatio, errorCount, got \"timeout\"",
		}},
		{"degrade_statuses.yaml", []string{
			"testdata/degrade_statuses.yaml:11: degradeRules[0].errorStatuses[2]: duplicate status \"5xx\" (also errorStatuses[1])",
			"testdata/degrade_statuses.yaml:11: degradeRules[0].errorStatuses[3]: must be a status code in 100..599 (429) or a class (\"5xx\"), got \"600\"",
			"testdata/degrade_statuses.yaml:11: degradeRules[0].errorStatuses[4]: must be a status code in 100..599 (429) or a class (\"5xx\"), got \"4x\"",
			"testdata/degrade_statuses.yaml:11: degradeRules[0].errorStatuses[5]: must be a status code in 100..599 (429) or a class (\"5xx\"), got \"error\"",
			"testdata/degrade_statuses.yaml:11: degradeRules[0].errorStatuses[6]: must be a status code in 100..599 (429) or a class (\"5xx\"), got \"99\"",
			"testdata/degrade_statuses.yaml:12: degradeRules[0].probeNum: must be >= 1 (probe calls in half-open), got 0",
			"testdata/degrade_statuses.yaml:17: degradeRules[1].probeNum: must be >= 1 (probe calls in half-open), got -2",
		}},
		{"duplicate_key.yaml", []string{
			"testdata/duplicate_key.yaml:10: flowRules[0].count: duplicate key (first at line 9)",
		}},
		{"duplicate_route.yaml", []string{
			"testdata/duplicate_route.yaml:8: routes[1].path: duplicate route: POST /order/{orderId} is already served by routes[0] (line 5)",
		}},
		{"duration_limits.yaml", []string{
			"testdata/duration_limits.yaml:12: flowRules[0].warmUpPeriodSec: must be <= 31536000 (one year), got 31536001",
			"testdata/duration_limits.yaml:13: flowRules[0].maxQueueingTimeMs: must be <= 31536000000 (one year), got 9223372036854775807",
			"testdata/duration_limits.yaml:18: paramRules[0].durationSec: must be <= 31536000 (one year), got 9223372037",
			"testdata/duration_limits.yaml:20: paramRules[0].maxQueueingTimeMs: must be <= 31536000000 (one year), got 31536000001",
			"testdata/duration_limits.yaml:24: degradeRules[0].maxAllowedRtMs: must be <= 31536000000 (one year), got 9300000000000",
			"testdata/duration_limits.yaml:26: degradeRules[0].retryTimeoutMs: must be <= 31536000000 (one year), got 9223372036854775807",
			"testdata/duration_limits.yaml:28: system.maxAvgRtMs: must be <= 31536000000 (one year), got 9300000000000",
		}},
		{"empty.yaml", []string{
			"testdata/empty.yaml: file is empty",
		}},
		{"flow_burst.yaml", []string{
			"testdata/flow_burst.yaml:10: flowRules[0].burstCount: is only used with controlBehavior throttle, got controlBehavior \"reject\"",
			"testdata/flow_burst.yaml:14: flowRules[1].burstCount: is only used with controlBehavior throttle, got controlBehavior \"warmUpThrottle\"",
			"testdata/flow_burst.yaml:18: flowRules[2].burstCount: must be >= 0, got -1",
			"testdata/flow_burst.yaml:22: flowRules[3].burstCount: must be <= 2147483648 (2^31), got 4294967296",
		}},
		{"limit_app_empty.yaml", []string{
			"testdata/limit_app_empty.yaml:10: flowRules[0].limitApp: must not be empty (default, other, or a comma-separated list of origins)",
			"testdata/limit_app_empty.yaml:12: flowRules[0].refResource: is only used with strategy relate or chain",
			"testdata/limit_app_empty.yaml:13: flowRules[0].coldFactor: must be > 1, got 0.5",
			"testdata/limit_app_empty.yaml:17: flowRules[1].refResource: must differ from resource with strategy relate",
			"testdata/limit_app_empty.yaml:18: flowRules[2].refResource: is required with strategy chain (the entrance name)",
		}},
		{"many_errors.yaml", []string{
			"testdata/many_errors.yaml:7: routes[0].upstream: unknown upstream \"missing\" (defined: app)",
			"testdata/many_errors.yaml:8: routes[1].path: duplicate route: /api is already served by routes[0] (line 6)",
			"testdata/many_errors.yaml:12: flowRules[0].count: must be > 0, got -1",
			"testdata/many_errors.yaml:13: flowRules[0].colour: unknown field",
			"testdata/many_errors.yaml:14: flowRules[1].resource: unknown resource \"/nope\": no route has it (resources: /api)",
			"testdata/many_errors.yaml:17: blockResponse.status: must be an HTTP error status in 400..599, got 302",
		}},
		{"missing_count.yaml", []string{
			"testdata/missing_count.yaml:8: flowRules[0].count: is required (a number > 0)",
		}},
		{"warmup_fraction.yaml", []string{
			"testdata/warmup_fraction.yaml:9: flowRules[0].count: must be >= 1 with controlBehavior warmUp, got 0.5 (warmUpThrottle spaces calls at any rate)",
		}},
		{"negative_count.yaml", []string{
			"testdata/negative_count.yaml:9: flowRules[0].count: must be > 0, got -5",
		}},
		{"no_routes.yaml", []string{
			"testdata/no_routes.yaml:1: routes: at least one route is required",
		}},
		{"not_a_mapping.yaml", []string{
			"testdata/not_a_mapping.yaml:1: the file must be a mapping of settings (listen, upstreams, routes, ...), got a list",
		}},
		{"origin_strip.yaml", []string{
			"testdata/origin_strip.yaml:3: origin.strip: needs origin.from to be a header:NAME source (only a header can be removed before forwarding), got \"ip\"",
		}},
		{"origin_strip_unset.yaml", []string{
			"testdata/origin_strip_unset.yaml:2: origin.strip: needs origin.from to be a header:NAME source, but origin.from is not set",
		}},
		{"param_items.yaml", []string{
			"testdata/param_items.yaml:9: paramRules[0].param: no route of resource \"/order/{id}\" has a path parameter {orderId}",
			"testdata/param_items.yaml:11: paramRules[0].controlBehavior: must be one of reject, throttle, got \"warmUp\"",
			"testdata/param_items.yaml:14: paramRules[0].items[1].value: duplicate value \"7\" (also items[0])",
			"testdata/param_items.yaml:14: paramRules[0].items[1].count: must be >= 0, got -1",
			"testdata/param_items.yaml:15: paramRules[0].items[2].count: is required (the value's own count, a number >= 0; 0 refuses every call with the value)",
		}},
		{"param_match.yaml", []string{
			"testdata/param_match.yaml:11: paramRules[0].match.pattern: invalid regexp: missing closing ): `^(ann|bob`",
			"testdata/param_match.yaml:13: paramRules[0].items[0].match: cidr needs address values: param must be ip or a header holding an address, got \"query:user\"",
			"testdata/param_match.yaml:14: paramRules[0].items[1].value: invalid regexp: missing closing ]: `[a-`",
			"testdata/param_match.yaml:15: paramRules[0].items[2].match: must be one of exact, prefix, contains, regex, cidr, got \"glob\"",
			"testdata/param_match.yaml:17: paramRules[0].items[4].value: items[3] (prefix \"9\") takes \"9\" first, so the item would never apply: list it before items[3]",
			"testdata/param_match.yaml:18: paramRules[0].items[5].value: duplicate value \"9\" (also items[3])",
			"testdata/param_match.yaml:19: paramRules[0].items[6].value: must not be empty with strategy contains",
			"testdata/param_match.yaml:23: paramRules[1].match.strategy: cidr needs address values: param must be ip or a header holding an address, got \"query:id\"",
			"testdata/param_match.yaml:27: paramRules[2].match.pattern: must be a CIDR (10.0.0.0/8, 2001:db8::/32) or an IP address, got \"10.0.0.0/33\"",
			"testdata/param_match.yaml:31: paramRules[3].match.strategy: is required with a pattern (one of exact, prefix, contains, regex, cidr)",
			"testdata/param_match.yaml:35: paramRules[4].match.strategy: must be one of exact, prefix, contains, regex, cidr, got \"suffix\"",
			"testdata/param_match.yaml:39: paramRules[5].match.pattern: must not be empty with strategy prefix",
		}},
		{"param_composite.yaml", []string{
			`testdata/param_composite.yaml:13: paramRules[0].items[1].value: must be 2 values joined by "+", one for each source of ip+header:X-Tenant (\+ and \\ stand for a "+" and a "\" inside a value), got "10.0.0.1\\+acme"`,
			`testdata/param_composite.yaml:14: paramRules[0].items[2].value: must be 2 values joined by "+", one for each source of ip+header:X-Tenant (\+ and \\ stand for a "+" and a "\" inside a value), got "10.0.0.1+acme+x"`,
			`testdata/param_composite.yaml:17: paramRules[1].param: composite key "ip+ip" names ip twice`,
			`testdata/param_composite.yaml:20: paramRules[2].param: composite key "ip+" has an empty part (write sources joined by "+", as in ip+header:X-Tenant)`,
			`testdata/param_composite.yaml:23: paramRules[3].param: a composite key joins at most 4 sources, got 5 in "ip+host+query:a+query:b+query:c"`,
			`testdata/param_composite.yaml:26: paramRules[4].param: no route of resource "/order/{id}" has a path parameter {orderId}`,
			`testdata/param_composite.yaml:31: paramRules[5].match.strategy: cidr needs address values: param must be ip or a header holding an address, got "ip+header:X-Tenant"`,
		}},
		// Items, patterns and burstCount that would load and never apply.
		{"param_never_applies.yaml", []string{
			`testdata/param_never_applies.yaml:12: paramRules[0].items[0].value: must not be empty: no source gives an empty value (a request without the parameter is not limited by the rule; limit it with a flow rule)`,
			`testdata/param_never_applies.yaml:18: paramRules[1].items[0].value: must not be empty: no source gives an empty value (a request without the parameter is not limited by the rule; limit it with a flow rule)`,
			`testdata/param_never_applies.yaml:23: paramRules[2].items[0].value: write the value as the sources of ip+header:X-Tenant give it, "2001:db8::7+acme" (the ip source gives addresses as RFC 5952 writes them, an IPv4-mapped one as IPv4), got "2001:DB8::7+acme"`,
			`testdata/param_never_applies.yaml:24: paramRules[2].items[1].value: write the value as the sources of ip+header:X-Tenant give it, "192.0.2.7+acme" (the ip source gives addresses as RFC 5952 writes them, an IPv4-mapped one as IPv4), got "::ffff:192.0.2.7+acme"`,
			`testdata/param_never_applies.yaml:25: paramRules[2].items[2].value: write the value as the sources of ip+header:X-Tenant give it, "CORP\\\\alice+x" (a "\" inside a value is written "\\", a "+" "\+"), got "CORP\\alice+x"`,
			`testdata/param_never_applies.yaml:26: paramRules[2].items[3].value: write the value as the sources of ip+header:X-Tenant give it, "10.0.0.1+CORP\\\\alice" (a "\" inside a value is written "\\", a "+" "\+"), got "10.0.0.1+CORP\\alice"`,
			`testdata/param_never_applies.yaml:27: paramRules[2].items[4].value: part 2 (header:X-Tenant) is empty: a request giving an empty value has no value for the key, so the item would never apply, got "10.0.0.1+"`,
			`testdata/param_never_applies.yaml:28: paramRules[2].items[5].value: part 1 (ip) is empty: a request giving an empty value has no value for the key, so the item would never apply, got "+acme"`,
			`testdata/param_never_applies.yaml:34: paramRules[3].match.pattern: write the pattern in lower case, "api.": the host source gives lower-case hosts, got "API."`,
			`testdata/param_never_applies.yaml:36: paramRules[3].items[0].value: write the host as the host source gives it (lower-case, without port or trailing dot), "shop.example.com", got "Shop.Example.com"`,
			`testdata/param_never_applies.yaml:37: paramRules[3].items[1].value: write the host as the host source gives it (lower-case, without port or trailing dot), "shop.example.com", got "shop.example.com."`,
			`testdata/param_never_applies.yaml:38: paramRules[3].items[2].value: write the host as the host source gives it (lower-case, without port or trailing dot), "shop.example.com", got "shop.example.com:8443"`,
			`testdata/param_never_applies.yaml:39: paramRules[3].items[3].value: write the host as the host source gives it (lower-case, without port or trailing dot), "2001:db8::1", got "[2001:DB8::1]"`,
			`testdata/param_never_applies.yaml:40: paramRules[3].items[4].value: write the pattern in lower case, "shop.": the host source gives lower-case hosts, got "Shop."`,
			`testdata/param_never_applies.yaml:41: paramRules[3].items[5].value: write the pattern in lower case, "example": the host source gives lower-case hosts, got "Example"`,
			`testdata/param_never_applies.yaml:43: paramRules[3].items[7].value: items[6] (regex "(?i)^SHOP") takes "shop.example.com" first, so the item would never apply: list it before items[6]`,
			`testdata/param_never_applies.yaml:48: paramRules[4].items[0].value: write the value as the sources of host+header:X-Tenant give it, "shop.example.com+acme" (the host source gives hosts lower-case, without port or trailing dot), got "Shop.Example.com:443+acme"`,
			`testdata/param_never_applies.yaml:54: paramRules[5].burstCount: is only used with grade qps and controlBehavior reject, got grade "qps", controlBehavior "throttle"`,
			`testdata/param_never_applies.yaml:59: paramRules[6].burstCount: is only used with grade qps and controlBehavior reject, got grade "concurrency", controlBehavior "reject"`,
			`testdata/param_never_applies.yaml:69: paramRules[8].items[1].value: items[0] (prefix "a") takes "ab" first, so the item would never apply: list it before items[0]`,
			`testdata/param_never_applies.yaml:76: paramRules[9].items[0].value: the rule's match (prefix "vip-") does not take "abc", so the item would never apply`,
			`testdata/param_never_applies.yaml:83: paramRules[10].items[1].value: items[0] (cidr "127.0.0.0/8") takes every value cidr "127.0.0.0/16" takes first, so the item would never apply: list it before items[0]`,
			`testdata/param_never_applies.yaml:84: paramRules[10].items[2].value: items[0] (cidr "127.0.0.0/8") takes every value cidr "::ffff:127.1.0.0/112" takes first, so the item would never apply: list it before items[0]`,
			`testdata/param_never_applies.yaml:91: paramRules[11].items[1].value: items[0] (prefix "a") takes every value prefix "ab" takes first, so the item would never apply: list it before items[0]`,
			`testdata/param_never_applies.yaml:93: paramRules[11].items[3].value: items[2] (contains "x") takes every value prefix "bx" takes first, so the item would never apply: list it before items[2]`,
			`testdata/param_never_applies.yaml:94: paramRules[11].items[4].value: items[2] (contains "x") takes every value contains "yxz" takes first, so the item would never apply: list it before items[2]`,
			`testdata/param_never_applies.yaml:101: paramRules[12].items[0].value: the rule's match (prefix "tenant-") takes no value prefix "free-" takes, so the item would never apply`,
			`testdata/param_never_applies.yaml:109: paramRules[13].items[0].value: the rule's match (cidr "10.0.0.0/8") takes no value cidr "192.168.0.0/16" takes, so the item would never apply`,
			`testdata/param_never_applies.yaml:116: paramRules[14].items[1].value: write the credentials as header:Authorization gives them, "Bearer sk-2" (the header source gives credentials with the scheme spelt one way (Basic, Bearer, other schemes in lower case), one space after it, and Basic's base64 in its standard form), got "bearer  sk-2"`,
			`testdata/param_never_applies.yaml:117: paramRules[14].items[2].value: write the credentials as header:Authorization gives them, "Basic YWxpY2U6cHc=" (the header source gives credentials with the scheme spelt one way (Basic, Bearer, other schemes in lower case), one space after it, and Basic's base64 in its standard form), got "basic YWxpY2U6cHc"`,
		}},
		{"param_concurrency.yaml", []string{
			"testdata/param_concurrency.yaml:11: paramRules[0].count: must be a whole number for grade concurrency, got 1.5",
			"testdata/param_concurrency.yaml:14: paramRules[0].items[1].count: must be a whole number for grade concurrency, got 0.5",
		}},
		{"param_count_on.yaml", []string{
			"testdata/param_count_on.yaml:8: paramRules[0].failureStatuses: is required with countOn failure (the answers that take tokens, e.g. [401])",
			"testdata/param_count_on.yaml:15: paramRules[1].failureStatuses: is read only with countOn failure, got countOn \"request\"",
			"testdata/param_count_on.yaml:19: paramRules[2].countOn: must be one of request, failure, responseHeader:NAME, got \"failures\"",
			"testdata/param_count_on.yaml:23: paramRules[3].countOn: responseHeader needs a header name (an HTTP token), as in \"responseHeader:X-Tokens-Used\", got \"responseHeader:\"",
			"testdata/param_count_on.yaml:27: paramRules[4].countOn: responseHeader needs a header name (an HTTP token), as in \"responseHeader:X-Tokens-Used\", got \"responseHeader:X Tokens\"",
			"testdata/param_count_on.yaml:32: paramRules[5].failureStatuses[1]: must be a status code in 100..599 (429) or a class (\"5xx\"), got \"700\"",
			"testdata/param_count_on.yaml:32: paramRules[5].failureStatuses[3]: duplicate status \"401\" (also failureStatuses[0])",
			"testdata/param_count_on.yaml:32: paramRules[5].failureStatuses[4]: must be a status code in 100..599 (429) or a class (\"5xx\"), got \"40\"",
			"testdata/param_count_on.yaml:37: paramRules[6].countOn: \"failure\" needs grade qps (a call in flight is counted as it enters), got \"concurrency\"",
			"testdata/param_count_on.yaml:43: paramRules[7].countOn: \"responseHeader:X-Tokens-Used\" needs controlBehavior reject (a queue spaces calls before any answer), got \"throttle\"",
			"testdata/param_count_on.yaml:44: paramRules[7].failureStatuses: is read only with countOn failure, got countOn \"responseHeader:X-Tokens-Used\"",
			"testdata/param_count_on.yaml:54: paramRules[9].clusterMode: needs a Redis: set cluster.redis (a redis:// URL), cluster.sentinel or cluster.clusterAddrs",
			"testdata/param_count_on.yaml:60: paramRules[10].countOn: \"ratelimit\" is a field the gateway writes on its answers; the upstream's figure needs a field of its own, as in \"responseHeader:X-Tokens-Used\"",
			"testdata/param_count_on.yaml:64: paramRules[11].countOn: \"Retry-After\" is a field the gateway writes on its answers; the upstream's figure needs a field of its own, as in \"responseHeader:X-Tokens-Used\"",
			"testdata/param_count_on.yaml:68: paramRules[12].countOn: \"transfer-encoding\" is a hop-by-hop field, which the gateway removes from the answer before reading it; the upstream's figure needs an end-to-end field, as in \"responseHeader:X-Tokens-Used\"",
		}},
		{"param_zero_count.yaml", []string{
			"testdata/param_zero_count.yaml:11: paramRules[0].count: must be > 0, got 0",
		}},
		{"qps_count_too_large.yaml", []string{
			"testdata/qps_count_too_large.yaml:9: flowRules[0].count: must be <= 2147483648 (2^31), got 3000000000",
		}},
		{"redis_options.yaml", []string{
			"testdata/redis_options.yaml:8: cluster.redis: must not have a query or fragment (sluice sets the connection options itself), got \"redis://sluice:xxxxx@127.0.0.1:6379/0?pool_size=abc\"",
		}},
		{"redis_port.yaml", []string{
			"testdata/redis_port.yaml:8: cluster.redis: the port must be a number in 1..65535, got \"redis://sluice:xxxxx@127.0.0.1:99999/0\"",
		}},
		{"redis_cluster_bad.yaml", []string{
			"testdata/redis_cluster_bad.yaml:14: cluster.clusterAddrs[1]: must be written like clusterAddrs[0]: every node a host:port, or every one a URL with the same scheme, user and password, got \"redis://sluice:xxxxx@127.0.0.1:7001\"",
			"testdata/redis_cluster_bad.yaml:15: cluster.clusterAddrs[2]: must be written like clusterAddrs[0]: every node a host:port, or every one a URL with the same scheme, user and password, got \"127.0.0.1:7002\"",
			"testdata/redis_cluster_bad.yaml:16: cluster.clusterAddrs[3]: must be written like clusterAddrs[0]: every node a host:port, or every one a URL with the same scheme, user and password, got \"rediss://sluice:xxxxx@127.0.0.1:7003\"",
			"testdata/redis_cluster_bad.yaml:17: cluster.clusterAddrs[4]: must not name a database: a Redis Cluster has only database 0, got \"redis://sluice:xxxxx@127.0.0.1:7004/3\"",
			"testdata/redis_cluster_bad.yaml:18: cluster.clusterAddrs[5]: must not have a query or fragment (sluice sets the connection options itself), got \"redis://sluice:xxxxx@127.0.0.1:7005?pool_size=9\"",
			"testdata/redis_cluster_bad.yaml:19: cluster.clusterAddrs[6]: must be host:port or a redis:// (rediss:// for TLS) URL, got \"http://127.0.0.1:7006\"",
			"testdata/redis_cluster_bad.yaml:20: cluster.clusterAddrs[7]: duplicate node \"127.0.0.1:7000\" (also clusterAddrs[0])",
			"testdata/redis_cluster_bad.yaml:21: cluster.clusterAddrs[8]: the port must be a number in 1..65535, got \"127.0.0.1:99999\"",
		}},
		{"redis_cluster_empty.yaml", []string{
			"testdata/redis_cluster_empty.yaml:12: cluster.clusterAddrs: must list at least one node of the Redis Cluster (host:port)",
		}},
		{"redis_none.yaml", []string{
			"testdata/redis_none.yaml:11: cluster: names no Redis: set one of cluster.redis (a redis:// URL), cluster.sentinel or cluster.clusterAddrs",
		}},
		{"redis_sentinel_bad.yaml", []string{
			"testdata/redis_sentinel_bad.yaml:12: cluster.sentinel.masterName: is required (the name the Sentinels monitor the master under, as in \"sentinel monitor mymaster ...\")",
			"testdata/redis_sentinel_bad.yaml:15: cluster.sentinel.addrs[1]: must be a Sentinel's host:port, usually port 26379 (no scheme: set tls for TLS), got \"redis://127.0.0.1:26380\"",
			"testdata/redis_sentinel_bad.yaml:16: cluster.sentinel.addrs[2]: the port must be a number in 1..65535, got \"127.0.0.1:0\"",
			"testdata/redis_sentinel_bad.yaml:17: cluster.sentinel.addrs[3]: duplicate address \"127.0.0.1:26379\" (also addrs[0])",
			"testdata/redis_sentinel_bad.yaml:18: cluster.sentinel.addrs[4]: must be a Sentinel's host:port, usually port 26379 (no scheme: set tls for TLS), got \"sentinel-3\"",
			"testdata/redis_sentinel_bad.yaml:20: cluster.sentinel.db: must be >= 0, got -1",
		}},
		{"redis_sentinel_empty.yaml", []string{
			"testdata/redis_sentinel_empty.yaml:14: cluster.sentinel.addrs: must list at least one Sentinel (host:port, usually port 26379)",
			"testdata/redis_sentinel_empty.yaml:15: cluster.sentinel.tls: expected true or false, got \"maybe\"",
		}},
		{"redis_two_forms.yaml", []string{
			"testdata/redis_two_forms.yaml:13: cluster.sentinel: only one of redis, sentinel and clusterAddrs may name the Redis, but cluster.redis is set too (line 12)",
			"testdata/redis_two_forms.yaml:16: cluster.clusterAddrs: only one of redis, sentinel and clusterAddrs may name the Redis, but cluster.redis is set too (line 12)",
		}},
		{"relate_unknown.yaml", []string{
			"testdata/relate_unknown.yaml:12: flowRules[0].refResource: unknown resource \"wirte\": no route has it (resources: read)",
		}},
		{"template_per_reason.yaml", []string{
			"testdata/template_per_reason.yaml:8: blockResponse.body: template fails for resource \"/api\" and reason \"system\": body:1:28: executing \"body\" at <index .Resource 9>: error calling index: index out of range: 9",
		}},
		{"template_per_resource.yaml", []string{
			"testdata/template_per_resource.yaml:11: blockResponse.body: template fails for resource \"/a\" and reason \"flow\": body:1:12: executing \"body\" at <slice .Resource 3>: error calling slice: index out of range: 3",
		}},
		{"tls_no_certificates.yaml", []string{
			"testdata/tls_no_certificates.yaml:2: tls.certificates: at least one certificate is required with tls.listen ({certFile, keyFile})",
			"testdata/tls_no_certificates.yaml:4: tls.redirectHttp: needs listen (the plain listener that answers with the redirect)",
		}},
		{"tls_without_listen.yaml", []string{
			"testdata/tls_without_listen.yaml:1: listen: must not be empty (an address like \":8080\")",
			"testdata/tls_without_listen.yaml:3: tls.certificates: needs tls.listen (the HTTPS listener's address, like \":8443\")",
			"testdata/tls_without_listen.yaml:5: tls.clientCAFile: needs tls.listen (the HTTPS listener's address, like \":8443\")",
			"testdata/tls_without_listen.yaml:6: tls.redirectHttp: needs tls.listen (the HTTPS listener's address, like \":8443\")",
			"testdata/tls_without_listen.yaml:7: tls.minVersion: must be one of 1.2, 1.3, got \"1.4\"",
			"testdata/tls_without_listen.yaml:8: tls.strictSni: needs tls.listen (the HTTPS listener's address, like \":8443\")",
			"testdata/tls_without_listen.yaml:10: http2.h2c: needs listen (h2c is HTTP/2 on the plain listener)",
		}},
		{"fractional_integers.yaml", []string{
			"testdata/fractional_integers.yaml:7: upstreams.app.retries: expected an integer, got \"2.9\"",
			"testdata/fractional_integers.yaml:11: routes[0].acquireCount: expected an integer, got \"3.99\"",
			"testdata/fractional_integers.yaml:16: paramRules[0].durationSec: expected an integer, got \"1.5\"",
			"testdata/fractional_integers.yaml:23: flowRules[0].statIntervalMs: expected an integer, got \"1500.9\"",
			"testdata/fractional_integers.yaml:27: flowRules[1].maxQueueingTimeMs: expected an integer, got \"-.inf\"",
			"testdata/fractional_integers.yaml:28: flowRules[1].burstCount: expected an integer, got \"-1e300\"",
			"testdata/fractional_integers.yaml:31: flowRules[2].warmUpPeriodSec: expected an integer, got \".inf\"",
		}},
		{"two_documents.yaml", []string{
			"testdata/two_documents.yaml:7: invalid YAML: only one document is allowed (remove the second \"---\")",
		}},
		{"unknown_field.yaml", []string{
			"testdata/unknown_field.yaml:8: flowRules[0].count: is required (a number > 0)",
			"testdata/unknown_field.yaml:9: flowRules[0].cuont: unknown field; did you mean \"count\"?",
		}},
		{"unknown_resource.yaml", []string{
			"testdata/unknown_resource.yaml:9: flowRules[0].resource: unknown resource \"get-ordr\": no route has it (resources: get-order)",
			"testdata/unknown_resource.yaml:12: degradeRules[0].resource: unknown resource \"/order/{id}\": no route has it (resources: get-order)",
		}},
		{"unknown_top_level.yaml", []string{
			"testdata/unknown_top_level.yaml:1: upstream: unknown field; did you mean \"upstreams\"?",
			"testdata/unknown_top_level.yaml:6: routes[0].upstream: unknown upstream \"app\" (defined: none)",
			"testdata/unknown_top_level.yaml:7: rateLimits: unknown field",
		}},
		{"unknown_upstream.yaml", []string{
			"testdata/unknown_upstream.yaml:6: routes[0].upstream: unknown upstream \"ap\" (defined: app)",
		}},
		{"warmup_params.yaml", []string{
			"testdata/warmup_params.yaml:11: flowRules[0].warmUpPeriodSec: must be > 0 with controlBehavior warmUp, got 0",
			"testdata/warmup_params.yaml:12: flowRules[0].coldFactor: must be > 1, got 1",
			"testdata/warmup_params.yaml:13: flowRules[0].maxQueueingTimeMs: must be >= 0, got -1",
			"testdata/warmup_params.yaml:14: flowRules[0].statIntervalMs: must be > 0 and <= 3600000 (one hour), got 7200000",
		}},
		{"wrong_type.yaml", []string{
			"testdata/wrong_type.yaml:3: upstreams.app.targets: expected a list, got \"http://127.0.0.1:9001\"",
			"testdata/wrong_type.yaml:4: upstreams.app.timeout: expected a duration like \"30s\" or \"500ms\", got \"30\"",
			"testdata/wrong_type.yaml:8: routes[0].acquireCount: expected an integer, got \"many\"",
			"testdata/wrong_type.yaml:11: flowRules[0].count: expected a number, got \"ten\"",
			"testdata/wrong_type.yaml:12: flowRules[0].dryRun: expected true or false, got \"maybe\"",
		}},
		{"zero_count.yaml", []string{
			"testdata/zero_count.yaml:9: flowRules[0].count: must be > 0, got 0",
		}},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		seen[tt.file] = true
		t.Run(tt.file, func(t *testing.T) {
			cfg, err := config.Load(filepath.Join("testdata", tt.file))
			if cfg != nil {
				t.Errorf("Load returned a Config along with errors")
			}
			assertErrors(t, err, tt.want)
		})
	}
	// Every testdata file is either valid or listed above.
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, f := range files {
		if _, err := config.Load(f); err != nil && !seen[filepath.Base(f)] {
			t.Errorf("%s fails but has no expected messages:\n%v", f, err)
		}
	}
}

// assertErrors checks that err is a config.Errors whose messages are exactly want.
func assertErrors(t *testing.T, err error, want []string) {
	t.Helper()
	var es config.Errors
	if !errors.As(err, &es) {
		t.Fatalf("error = %v (%T), want config.Errors", err, err)
	}
	got := strings.Split(es.Error(), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n got: %s\nwant: %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
	if len(es) != len(want) {
		t.Errorf("len(Errors) = %d, want %d", len(es), len(want))
	}
}

func TestLoadFileProblems(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, config.MaxDocumentBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	// 9 MiB and 64 MiB, sparse: refused from their size alone, never read
	// into memory.
	sparse := func(name string, size int64) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return p
	}
	nine, huge := sparse("nine.yaml", 9<<20), sparse("huge.yaml", 64<<20)
	unreadable := filepath.Join(dir, "secret.yaml")
	if err := os.WriteFile(unreadable, []byte("listen: :1\n"), 0o000); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"fifo", fifo, fifo + ": is not a regular file (a named pipe)"},
		{"directory", dir, dir + ": is a directory, not a file"},
		{"missing", filepath.Join(dir, "nope.yaml"), filepath.Join(dir, "nope.yaml") + ": file does not exist"},
		{"one byte over", big, big + ": file is 8388609 bytes, over the 8 MiB limit of a rules document"},
		{"9 MiB", nine, nine + ": file is 9437184 bytes, over the 8 MiB limit of a rules document"},
		{"64 MiB", huge, huge + ": file is 67108864 bytes, over the 8 MiB limit of a rules document"},
	}
	if os.Geteuid() != 0 { // root reads anything
		tests = append(tests, struct{ name, path, want string }{"unreadable", unreadable, unreadable + ": cannot read file: permission denied"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load(tt.path)
			assertErrors(t, err, []string{tt.want})
		})
	}
}

func TestParseOversizeRefusedBeforeParsing(t *testing.T) {
	// Invalid YAML past the limit: the size, not the syntax, is reported.
	data := []byte(strings.Repeat("{", config.MaxDocumentBytes+1))
	_, err := config.Parse("big.yaml", data)
	assertErrors(t, err, []string{"big.yaml: file is 8388609 bytes, over the 8 MiB limit of a rules document"})
}

// A file of exactly MaxDocumentBytes (a valid file padded with a comment)
// loads: the limit refuses only what is over it.
func TestLoadAtTheSizeLimit(t *testing.T) {
	head := "routes:\n  - {path: /a, upstream: app}\nupstreams:\n  app: {targets: [\"http://127.0.0.1:9001\"]}\n# "
	data := head + strings.Repeat("x", config.MaxDocumentBytes-len(head)-1) + "\n"
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path); err != nil {
		t.Errorf("a valid file of %d bytes: %v", len(data), err)
	}
	if err := os.WriteFile(path, []byte(data+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(path)
	assertErrors(t, err, []string{path + ": file is 8388609 bytes, over the 8 MiB limit of a rules document"})
}

func TestErrorString(t *testing.T) {
	tests := []struct {
		e    config.Error
		want string
	}{
		{config.Error{File: "rules.yaml", Line: 12, Field: "flowRules[0].count", Msg: "must be > 0"}, "rules.yaml:12: flowRules[0].count: must be > 0"},
		{config.Error{File: "rules.yaml", Line: 3, Msg: "invalid YAML: x"}, "rules.yaml:3: invalid YAML: x"},
		{config.Error{File: "rules.yaml", Msg: "file is empty"}, "rules.yaml: file is empty"},
	}
	for _, tt := range tests {
		if got := tt.e.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
	es := config.Errors{tests[0].e, tests[2].e}
	if got, want := es.Error(), tests[0].want+"\n"+tests[2].want; got != want {
		t.Errorf("Errors.Error() = %q, want %q", got, want)
	}
}

func TestTooManyErrorsAreCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("upstreams: {app: {targets: [\"http://a\"]}}\nroutes:\n")
	for range 150 {
		b.WriteString("  - {path: /a, upstream: nope}\n")
	}
	_, err := config.Parse("r.yaml", []byte(b.String()))
	var es config.Errors
	if !errors.As(err, &es) {
		t.Fatalf("error = %v", err)
	}
	if len(es) != 101 {
		t.Fatalf("len = %d, want 100 errors and a summary", len(es))
	}
	if got, want := es[100].String(), "r.yaml: too many errors (299); showing the first 100"; got != want {
		t.Errorf("last = %q, want %q", got, want)
	}
	if got, want := es[0].String(), `r.yaml:3: routes[0].upstream: unknown upstream "nope" (defined: app)`; got != want {
		t.Errorf("first = %q, want %q", got, want)
	}
}

// fleetDoc is how the gateways of testdata/fleet/gateway*.yaml name their
// rules document in messages.
const fleetDoc = "redis://127.0.0.1:6379/0/sluice:rules"

// TestRulesDocumentErrors merges a gateway's file with a rules document, as
// a gateway with rulesSource does, and asserts every message exactly:
// problems of the document are named redis://HOST/DB/KEY:LINE, the file's
// own by its name, the file's first.
func TestRulesDocumentErrors(t *testing.T) {
	tests := []struct {
		gateway, doc string // under testdata/; doc "" = an empty document
		want         []string
	}{
		{"fleet/gateway.yaml", "fleet/doc_errors.yaml", []string{
			fleetDoc + ":6: routes[0].upstream: unknown upstream \"order\" (defined: orders)",
			fleetDoc + ":8: flowRules[0].resource: unknown resource \"get-order\": no route has it (resources: /order/{id})",
			fleetDoc + ":9: flowRules[0].count: must be > 0, got -1",
			fleetDoc + ":10: flowRules[0].graed: unknown field; did you mean \"grade\"?",
			fleetDoc + ":13: paramRules[0].param: no route of resource \"/order/{id}\" has a path parameter {nope}",
		}},
		{"fleet/gateway.yaml", "fleet/doc_gateway_sections.yaml", []string{
			fleetDoc + ":1: listen: is a gateway's own setting: it belongs in each gateway's rules file, not in the shared rules document",
			fleetDoc + ":5: admin: is a gateway's own setting: it belongs in each gateway's rules file, not in the shared rules document",
			fleetDoc + ":10: rulesSource: is a gateway's own setting: it belongs in each gateway's rules file, not in the shared rules document",
			fleetDoc + ":12: server: is a gateway's own setting: it belongs in each gateway's rules file, not in the shared rules document",
		}},
		{"fleet/gateway_holds_rules.yaml", "fleet/doc.yaml", []string{
			"testdata/fleet/gateway_holds_rules.yaml:5: routes: is in both this file and the rules document (" + fleetDoc + ":7); with rulesSource it belongs in the document only",
			"testdata/fleet/gateway_holds_rules.yaml:8: system: belongs in the rules document, not in this file: with rulesSource, each gateway's file holds only listen, tls, http2, server, admin, log, cluster, rulesSource",
			// The file's errors first, then the document's.
			fleetDoc + ":16: flowRules[1].clusterMode: needs a Redis: set cluster.redis (a redis:// URL), cluster.sentinel or cluster.clusterAddrs",
		}},
		{"fleet/gateway_no_cluster.yaml", "fleet/doc.yaml", []string{
			fleetDoc + ":16: flowRules[1].clusterMode: needs a Redis: set cluster.redis (a redis:// URL), cluster.sentinel or cluster.clusterAddrs",
		}},
		{"fleet/gateway.yaml", "fleet/doc_bad_yaml.yaml", []string{
			fleetDoc + ":3: invalid YAML: did not find expected ',' or ']'",
		}},
		{"fleet/gateway.yaml", "", []string{fleetDoc + ": rules document is empty"}},
		{"fleet/gateway_bad_source.yaml", "fleet/doc_errors.yaml", []string{
			"testdata/fleet/gateway_bad_source.yaml:3: rulesSource.redis: must be a redis://host:port/db URL, got \"http://127.0.0.1:6379\"",
			"testdata/fleet/gateway_bad_source.yaml:4: rulesSource.key: is required (the Redis key of the rules document, like \"sluice:rules\")",
			"testdata/fleet/gateway_bad_source.yaml:5: rulesSource.kye: unknown field; did you mean \"key\"?",
			// Then the document's, each under its own name and line.
			fleetDoc + ":6: routes[0].upstream: unknown upstream \"order\" (defined: orders)",
			fleetDoc + ":8: flowRules[0].resource: unknown resource \"get-order\": no route has it (resources: /order/{id})",
			fleetDoc + ":9: flowRules[0].count: must be > 0, got -1",
			fleetDoc + ":10: flowRules[0].graed: unknown field; did you mean \"grade\"?",
			fleetDoc + ":13: paramRules[0].param: no route of resource \"/order/{id}\" has a path parameter {nope}",
		}},
		// With a Sentinel-watched master the document is named by it.
		{"fleet/gateway_sentinel.yaml", "fleet/doc_errors.yaml", []string{
			"redis-sentinel://mymaster/2/sluice:rules:6: routes[0].upstream: unknown upstream \"order\" (defined: orders)",
			"redis-sentinel://mymaster/2/sluice:rules:8: flowRules[0].resource: unknown resource \"get-order\": no route has it (resources: /order/{id})",
			"redis-sentinel://mymaster/2/sluice:rules:9: flowRules[0].count: must be > 0, got -1",
			"redis-sentinel://mymaster/2/sluice:rules:10: flowRules[0].graed: unknown field; did you mean \"grade\"?",
			"redis-sentinel://mymaster/2/sluice:rules:13: paramRules[0].param: no route of resource \"/order/{id}\" has a path parameter {nope}",
		}},
		{"minimal.yaml", "fleet/doc.yaml", []string{
			"testdata/minimal.yaml: names no rulesSource, so no rules document can be merged into it; a gateway started with one keeps it until a restart (removing rulesSource takes effect at restart)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.gateway+"+"+tt.doc, func(t *testing.T) {
			data, err := os.ReadFile("testdata/" + tt.gateway)
			if err != nil {
				t.Fatal(err)
			}
			var doc []byte
			if tt.doc != "" {
				if doc, err = os.ReadFile("testdata/" + tt.doc); err != nil {
					t.Fatal(err)
				}
			}
			name := fleetDoc
			if local, err := config.Parse("testdata/"+tt.gateway, data); err == nil && local.RulesSource.Enabled() {
				name = local.RulesSource.Name() // as the gateway names it
			}
			_, err = config.ParseWithDocument("testdata/"+tt.gateway, data, name, doc)
			assertErrors(t, err, tt.want)
		})
	}
}

// A gateway's file with rulesSource checked alone (`sluice validate`): its
// own sections are checked, the document's are refused here, and a valid
// one loads without routes, waiting for its document.
func TestGatewayFileAlone(t *testing.T) {
	cfg, err := config.Load("testdata/fleet/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.NeedsDocument() || cfg.RulesSource.Name() != fleetDoc || len(cfg.Routes) != 0 {
		t.Fatalf("NeedsDocument %v, Name %q, %d routes", cfg.NeedsDocument(), cfg.RulesSource.Name(), len(cfg.Routes))
	}
	if got, want := cfg.RulesCachePath(), "testdata/fleet/gateway.last-good.yaml"; got != want {
		t.Errorf("RulesCachePath = %q, want %q", got, want)
	}
	for _, tt := range []struct {
		file string
		want []string
	}{
		{"gateway_holds_rules.yaml", []string{
			"testdata/fleet/gateway_holds_rules.yaml:5: routes: belongs in the rules document, not in this file: with rulesSource, each gateway's file holds only listen, tls, http2, server, admin, log, cluster, rulesSource",
			"testdata/fleet/gateway_holds_rules.yaml:8: system: belongs in the rules document, not in this file: with rulesSource, each gateway's file holds only listen, tls, http2, server, admin, log, cluster, rulesSource",
		}},
		{"gateway_no_redis.yaml", []string{
			"testdata/fleet/gateway_no_redis.yaml:2: rulesSource: names no Redis: set one of rulesSource.redis (a redis:// URL), rulesSource.sentinel or rulesSource.clusterAddrs",
		}},
		{"gateway_bad_source.yaml", []string{
			"testdata/fleet/gateway_bad_source.yaml:3: rulesSource.redis: must be a redis://host:port/db URL, got \"http://127.0.0.1:6379\"",
			"testdata/fleet/gateway_bad_source.yaml:4: rulesSource.key: is required (the Redis key of the rules document, like \"sluice:rules\")",
			"testdata/fleet/gateway_bad_source.yaml:5: rulesSource.kye: unknown field; did you mean \"key\"?",
		}},
	} {
		_, err := config.Load("testdata/fleet/" + tt.file)
		assertErrors(t, err, tt.want)
	}
}

// The merged rules are the file's own settings plus the document's.
func TestParseWithDocumentMerges(t *testing.T) {
	data, _ := os.ReadFile("testdata/fleet/gateway.yaml")
	doc, _ := os.ReadFile("testdata/fleet/doc.yaml")
	cfg, err := config.ParseWithDocument("testdata/fleet/gateway.yaml", data, fleetDoc, doc)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NeedsDocument() || cfg.Document != fleetDoc || cfg.Path != "testdata/fleet/gateway.yaml" {
		t.Fatalf("Document %q, Path %q", cfg.Document, cfg.Path)
	}
	if cfg.Listen != ":8080" || cfg.Cluster.Redis != "redis://127.0.0.1:6379/0" || len(cfg.Routes) != 1 ||
		len(cfg.FlowRules) != 2 || cfg.BlockResponse.Status != 503 || cfg.Origin.From.String() != "header:X-Origin" {
		t.Fatalf("merged config: %+v", cfg)
	}
	// The rules in force are served as JSON on the admin API: no password.
	for _, f := range []string{"gateway.yaml", "gateway_sentinel.yaml"} {
		local, err := config.Load("testdata/fleet/" + f)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(local)
		if strings.Contains(string(b), "secret") || !strings.Contains(string(b), "xxxxx") {
			t.Errorf("%s as JSON shows its password: %s", f, b)
		}
	}
	if cfg.Routes[0].Line != 8 || cfg.FlowRules[1].Line != 14 {
		t.Errorf("lines: route %d, rule %d; want the document's 8 and 14", cfg.Routes[0].Line, cfg.FlowRules[1].Line)
	}
}

// TestYAMLSyntaxErrorLines: a syntax error names the line of the mistake,
// or of the construct it breaks, never the line above it. yaml.v3 counts
// its parser's lines from 0 (its scanner's from 1): a flow sequence left
// open on line 4 was reported on line 3.
func TestYAMLSyntaxErrorLines(t *testing.T) {
	for _, c := range []struct {
		doc  string
		line int
	}{
		{"upstreams:\n  a:\n    targets: [\"http://x\"]\n    d: [1, 2\nroutes: []\n", 4},                                // flow sequence left open
		{"upstreams:\n  a:\n    targets: [\"http://x\"]\n token: 3\n", 4},                                               // a key out of its mapping
		{"routes:\n  - path: /a\n    upstream: [a\n", 3},                                                                // open at the end of the file
		{"upstreams: {}\nroutes:\n  - path: [\n\n\n", 3},                                                                // the end, past empty lines
		{"routes:\n  - path: /a\n   upstream: a\n", 3},                                                                  // the line indented wrong, not its entry
		{"routes:\n" + strings.Repeat("  - path: /a\n    upstream: a\n", 12) + "   methods: [GET]\n  - path: /b\n", 26}, // not the list's first entry, 24 lines up
		{"routes:\n  - path: /a\n    upstream: a\n\tresource: x\n", 4},                                                  // the tab, not the line above it
		{"routes: {path: /a\n", 1},                                                                                      // the file ended where '}' was due: its last line
		{"routes:\n  - path: /a\n    upstream: \"a\n", 3},                                                               // scanner: a quote left open
		{"a: b\nc: d: e\n", 2}, // scanner: a value where none may be
		// yaml.v3 names no line for these (the audit of 2026-12-07):
		{"routes:\n  - path: /a\n    upstream: a\nflowRules:\n  - resource: /a\n    count: *nosuch\n", 6}, // an unknown anchor
		{"routes:\n  - path: /a\n# caf\xe9\n    upstream: a\n", 3},                                        // a byte that is not UTF-8
		{"routes:\n  - path: /a\xe9\n    upstream: a\n", 2},                                               // in a value
		{"routes:\n  - path: /a\n    upstream: a\x07\n", 3},                                               // a control character
		{"a: 1\nb: *UTF-8\n\n\n\n", 2},                                                                    // an anchor so named (review)
	} {
		_, err := config.Parse("r.yaml", []byte(c.doc))
		var errs config.Errors
		if !errors.As(err, &errs) || len(errs) == 0 {
			t.Errorf("%q: got %v, want a syntax error", c.doc, err)
			continue
		}
		if got := errs[0].Line; got != c.line || !strings.Contains(errs[0].Msg, "invalid YAML") {
			t.Errorf("%q: %v, want line %d", c.doc, errs[0], c.line)
		}
	}
}

// TestInfiniteNumbersSayFinite: YAML's .inf was refused with "must be > 0,
// got +Inf", which reads as if +Inf were fine; the message says the
// number must be finite.
func TestInfiniteNumbersSayFinite(t *testing.T) {
	_, err := config.Parse("rules.yaml", []byte(`upstreams: {app: {targets: ["http://127.0.0.1:9001"]}}
routes: [{path: /a, upstream: app}]
flowRules:
  - resource: /a
    count: .inf
  - resource: /a
    count: 5
    controlBehavior: warmUp
    coldFactor: .inf
`))
	for _, want := range []string{
		"rules.yaml:5: flowRules[0].count: must be a finite number > 0, got +Inf",
		"rules.yaml:9: flowRules[1].coldFactor: must be a finite number > 1, got +Inf",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("errors %v; want %q", err, want)
		}
	}
}

// TestMergeKeyBombIsRefused: aliases in a merge list ("<<: [*a, *a, …]")
// each bring all of their mapping's keys. They were charged one node an
// alias, so a 50 KB file of ten thousand aliases of a thousand keys merged
// ten million pairs (13 s and 685 MB to validate; 400 KB ran out of memory
// on reload, or across a fleet reading it from Redis). Every merged pair
// counts now: the file is refused at the budget, with the budget's message.
func TestMergeKeyBombIsRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString("upstreams:\n  <<: [&a {")
	for i := range 1000 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "k%d: {targets: [\"http://127.0.0.1:1\"]}", i)
	}
	b.WriteString("}")
	for range 1000 {
		b.WriteString(", *a")
	}
	b.WriteString("]\nroutes:\n  - { path: /, upstream: k0 }\n")
	_, err := config.Parse("bomb.yaml", []byte(b.String()))
	var errs config.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("the merge bomb loaded (err %v)", err)
	}
	want := "bomb.yaml:2: upstreams: aliases expand to over 100000 values; write the settings out instead"
	if len(errs) != 1 || errs[0].String() != want {
		t.Errorf("%d errors, first %q; want only %q", len(errs), errs[0].String(), want)
	}
}

// TestBooleansAreTrueOrFalse: yaml.v3 decodes YAML 1.1's on, yes, y and n
// into a bool, quoted or not, so dryRun: "on" silently made a rule
// dry-run while dryRun: "true" was refused. A setting is true or false,
// unquoted; anything else is refused, with the field's line (and a quoted
// true is told why).
func TestBooleansAreTrueOrFalse(t *testing.T) {
	const head = "upstreams:\n  up: { targets: [\"http://127.0.0.1:1\"] }\nroutes:\n  - { path: /a, upstream: up, resource: a }\nflowRules:\n  - resource: a\n    count: 1\n    dryRun: "
	for _, tc := range []struct {
		value string
		ok    bool
	}{
		{"true", true}, {"false", true}, {"True", true}, {"FALSE", true}, {"!!bool true", true},
		{`"on"`, false}, {"on", false}, {`"yes"`, false}, {"yes", false}, {`"y"`, false}, {"n", false},
		{`"true"`, false}, {"1", false}, {"[true]", false},
	} {
		cfg, err := config.Parse("b.yaml", []byte(head+tc.value+"\n"))
		switch {
		case tc.ok && err != nil:
			t.Errorf("dryRun: %s refused: %v", tc.value, err)
		case !tc.ok && err == nil:
			t.Errorf("dryRun: %s loaded, as %v", tc.value, cfg.FlowRules[0].DryRun)
		case !tc.ok && !strings.HasPrefix(err.Error(), "b.yaml:8: flowRules[0].dryRun: expected true or false, got "):
			t.Errorf("dryRun: %s: %v", tc.value, err)
		}
	}
}
