package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"

	"sluice/admin"
)

// TestResourcesListTheMostActiveOrigins: the limiter tracks up to 10,000
// origins per resource; the page polls every second, so /api/resources lists
// the 50 most active unless asked for more, and says how many there are.
func TestResourcesListTheMostActiveOrigins(t *testing.T) {
	origins := make([]admin.NamedStats, 120)
	for i := range origins {
		// origin-119 is the busiest; origin-0 the quietest.
		origins[i] = admin.NamedStats{Name: fmt.Sprintf("origin-%d", i), NodeStats: admin.NodeStats{PassQps: float64(i), BlockQps: 1}}
	}
	stats := []admin.ResourceStats{{Resource: "orders", Origins: origins}}
	srv := admin.New(admin.Options{Stats: func() []admin.ResourceStats { return stats }})
	get := func(query string) (int, []admin.ResourceStats) {
		t.Helper()
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9090/api/resources"+query, nil))
		var body struct{ Resources []admin.ResourceStats }
		if rec.Code == 200 {
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
		}
		return rec.Code, body.Resources
	}
	cases := []struct {
		query      string
		wantListed int
	}{{"", 50}, {"?origins=5", 5}, {"?origins=0", 0}, {"?origins=all", 120}, {"?origins=500", 120}}
	for _, c := range cases {
		code, res := get(c.query)
		if code != 200 || len(res) != 1 {
			t.Fatalf("GET /api/resources%s: %d %v", c.query, code, res)
		}
		r := res[0]
		if len(r.Origins) != c.wantListed || r.OriginsTotal != 120 {
			t.Errorf("%q: %d origins listed of %d, want %d of 120", c.query, len(r.Origins), r.OriginsTotal, c.wantListed)
		}
		for i, o := range r.Origins {
			if want := fmt.Sprintf("origin-%d", 119-i); o.Name != want {
				t.Errorf("%q: origin %d is %s, want %s (most active first)", c.query, i, o.Name, want)
				break
			}
		}
	}
	for _, q := range []string{"?origins=-1", "?origins=many"} {
		if code, _ := get(q); code != 400 {
			t.Errorf("GET /api/resources%s: %d, want 400", q, code)
		}
	}
	if stats[0].Origins[0].Name != "origin-0" || len(stats[0].Origins) != 120 || stats[0].OriginsTotal != 0 {
		t.Error("serving /api/resources changed the slices Stats returned")
	}
}
