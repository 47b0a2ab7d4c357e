package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// A callgrind dump as valgrind 3.19 writes one for a Go binary: names
// given once and then by number, a function first named by a call to it,
// the inclusive cost of each call on the line after calls=, a recursion
// level marked f'2.
const dump = `# callgrind format
version: 1
events: Ir
summary: 1000

ob=(1) /tmp/bin
fl=(1) ./a.go
fn=(1) main.a
3 100
+1 20
cfn=(2) main.b
calls=1 0
0 500
fn=(2)
-2 300
cfn=(3) main.b'2
calls=2 0
* 200
fn=(3)
0 150
fl=(2) ./b.go
fn=(1)
0 30
fn=(4) runtime.mallocgc
0 400

totals: 1000
`

func TestSelfCostsReadsCallgrindsFormat(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.cg.1")
	if err := os.WriteFile(p, []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	ir, err := readSummary(p)
	if err != nil || ir != 1000 {
		t.Fatalf("readSummary = %d, %v; want 1000", ir, err)
	}
	got, err := selfCosts(irRun{ir: ir, n: 10, dump: p})
	if err != nil {
		t.Fatal(err)
	}
	// Calls' inclusive costs (500, 200) are not anyone's own; main.b'2 is main.b.
	want := map[string]float64{"main.a": 15, "main.b": 45, "runtime.mallocgc": 40}
	var sum float64
	for fn, v := range got {
		sum += v
		if want[fn] != v {
			t.Errorf("%s: %v per request, want %v", fn, v, want[fn])
		}
	}
	if sum*10 != 1000 {
		t.Errorf("self costs add up to %v, want the summary's 1000", sum*10)
	}
	if len(got) != len(want) {
		t.Errorf("functions %v, want %v", got, want)
	}
}

func TestAreas(t *testing.T) {
	for fn, want := range map[string]string{
		"sluice/proxy.(*quotas).set":         areas[0].name,
		"runtime.scanObject":                 areas[1].name,
		"runtime.mallocgcSmallScanNoHeader":  areas[2].name,
		"github.com/valyala/fasthttp.setArg": "fasthttp (the upstream exchange)",
		"runtime.memmove":                    areas[len(areas)-1].name,
	} {
		if got := area(fn); got != want {
			t.Errorf("area(%s) = %q, want %q", fn, got, want)
		}
	}
}

func TestAlive(t *testing.T) {
	if !alive(os.Getpid()) {
		t.Error("alive(self) = false")
	}
	if alive(1 << 30) {
		t.Error("alive(no such pid) = true")
	}
	// A child that exited and was not waited for is a zombie: gone.
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for alive(cmd.Process.Pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(cmd.Process.Pid) {
		t.Error("alive(an exited child not waited for) = true")
	}
}
