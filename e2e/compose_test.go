package e2e

import (
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"sluice/config"
)

// Docker cannot run on our machines, so this test checks what it can of
// each compose file: every sluice service's rules file passes `sluice
// validate`, and the services refer to each other consistently (every host
// the rules name, an upstream or a Redis in any of its forms, is a service
// the gateway depends on).
func TestDockerComposeIsConsistent(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"../docker-compose.yml", "../deploy/compose-sentinel.yml", "../deploy/compose-cluster.yml"} {
		t.Run(filepath.Base(file), func(t *testing.T) { checkCompose(t, file) })
	}
}

func checkCompose(t *testing.T, file string) {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(file)
	var compose struct {
		Services map[string]struct {
			Build     string    `yaml:"build"`
			Image     string    `yaml:"image"`
			Command   []string  `yaml:"command"`
			Volumes   []string  `yaml:"volumes"`
			Ports     []string  `yaml:"ports"`
			DependsOn dependsOn `yaml:"depends_on"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatal(err)
	}
	hostPorts := map[string]string{}
	gateways := 0
	for name, svc := range compose.Services {
		for _, d := range svc.DependsOn {
			if _, ok := compose.Services[d]; !ok {
				t.Errorf("service %s depends on unknown service %s", name, d)
			}
		}
		for _, p := range svc.Ports {
			parts := strings.Split(p, ":")
			host := strings.Join(parts[:len(parts)-1], ":")
			if other, dup := hostPorts[host]; dup {
				t.Errorf("services %s and %s both publish %s", name, other, host)
			}
			hostPorts[host] = name
		}
		if svc.Build == "" {
			continue
		}
		// A sluice service: built from the repository's root.
		if filepath.Join(dir, svc.Build) != ".." {
			t.Errorf("service %s builds %q, not the repository's root", name, svc.Build)
		}
		if _, err := os.Stat(filepath.Join(dir, svc.Build, "Dockerfile")); err != nil {
			t.Errorf("service %s builds %q, but: %v", name, svc.Build, err)
		}
		gateways++
		// The rules file is the volume mounted where -config points.
		cfgPath := ""
		for i, a := range svc.Command {
			if a == "-config" && i+1 < len(svc.Command) {
				cfgPath = svc.Command[i+1]
			}
		}
		mounted := func(inside string) string {
			for _, v := range svc.Volumes {
				parts := strings.Split(v, ":")
				if len(parts) >= 2 && parts[1] == inside {
					return filepath.Join(dir, parts[0])
				}
			}
			return ""
		}
		local := mounted(cfgPath)
		if local == "" {
			t.Fatalf("service %s: no volume provides its -config %q", name, cfgPath)
		}
		// A `sluice rules push` service: the document it pushes validates
		// with its gateway file, as the push itself will check.
		if len(svc.Command) > 1 && svc.Command[0] == "rules" && svc.Command[1] == "push" {
			doc := mounted(svc.Command[len(svc.Command)-1])
			data, err1 := os.ReadFile(local)
			text, err2 := os.ReadFile(doc)
			if err1 != nil || err2 != nil {
				t.Fatalf("service %s: reading %s and %s: %v %v", name, local, doc, err1, err2)
			}
			if _, err := config.ParseWithDocument(local, data, doc, text); err != nil {
				t.Errorf("service %s pushes an invalid document:\n%v", name, err)
			}
		}
		out, err := exec.Command(binary, "validate", local).CombinedOutput()
		if err != nil {
			t.Errorf("service %s: sluice validate %s: %v\n%s", name, local, err, out)
			continue
		}
		for _, host := range composeHosts(t, local) {
			if _, ok := compose.Services[host]; !ok {
				t.Errorf("service %s: rules name host %q, which is no compose service", name, host)
			}
			if !contains(svc.DependsOn, host) {
				t.Errorf("service %s: uses %s but does not depend on it", name, host)
			}
		}
	}
	if gateways < 2 {
		t.Errorf("%d sluice gateways in %s, want at least 2 sharing a cluster rule", gateways, file)
	}
}

// redisNamed is a Redis as a rules file names it, in any of its forms.
type redisNamed struct {
	Redis    string `yaml:"redis"`
	Sentinel struct {
		Addrs []string `yaml:"addrs"`
	} `yaml:"sentinel"`
	ClusterAddrs []string `yaml:"clusterAddrs"`
}

// composeHosts are the hosts a rules file names: its upstream targets and
// the Redis of cluster and rulesSource, in whichever form (URL, Sentinels,
// Cluster seeds).
func composeHosts(t *testing.T, rulesFile string) []string {
	t.Helper()
	var rules struct {
		Upstreams map[string]struct{ Targets []string } `yaml:"upstreams"`
		Cluster   redisNamed                            `yaml:"cluster"`
		Source    redisNamed                            `yaml:"rulesSource"`
	}
	b, _ := os.ReadFile(rulesFile)
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	var urls, addrs []string
	for _, u := range rules.Upstreams {
		urls = append(urls, u.Targets...)
	}
	for _, r := range []redisNamed{rules.Cluster, rules.Source} {
		if r.Redis != "" {
			urls = append(urls, r.Redis)
		}
		addrs = append(addrs, r.Sentinel.Addrs...)
		for _, a := range r.ClusterAddrs {
			if strings.Contains(a, "://") {
				urls = append(urls, a)
			} else {
				addrs = append(addrs, a)
			}
		}
	}
	var hosts []string
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			t.Errorf("%s: %q: %v", rulesFile, raw, err)
			continue
		}
		hosts = append(hosts, u.Hostname())
	}
	for _, a := range addrs {
		h, _, err := net.SplitHostPort(a)
		if err != nil {
			t.Errorf("%s: %q: %v", rulesFile, a, err)
			continue
		}
		hosts = append(hosts, h)
	}
	return hosts
}

// dependsOn reads depends_on in both of compose's forms: a list of
// services, or a mapping of service to condition.
type dependsOn []string

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			*d = append(*d, n.Content[i].Value)
		}
		return nil
	}
	var list []string
	if err := n.Decode(&list); err != nil {
		return err
	}
	*d = list
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
