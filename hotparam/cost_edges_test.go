package hotparam

import "testing"

// Review: the figures the brief names, each read as the docs say.
func TestParseCostEdges(t *testing.T) {
	for _, c := range []struct {
		in   []string
		cost int64
		ok   bool
	}{
		{[]string{"-5"}, 0, false},
		{[]string{"1e30"}, 0, false},
		{[]string{"1000000000000000000000000000000"}, maxCost, true},
		{[]string{"9007199254740993"}, maxCost, true},
		{[]string{"9007199254740991"}, maxCost - 1, true},
		{[]string{"1.5"}, 0, false},
		{[]string{"0x10"}, 0, false},
		{[]string{" 12\t"}, 12, true},
		{[]string{"1 2"}, 0, false},
		{[]string{"+3"}, 0, false},
		{[]string{"3", "7", "5"}, 7, true},
		{[]string{"3, -9, 4"}, 4, true},
		{[]string{",,"}, 0, false},
		{[]string{"0"}, 0, true},
		{[]string{"007"}, 7, true},
		{[]string{"٣"}, 0, false},
		{[]string{"5\r"}, 0, false},
		{nil, 0, false},
	} {
		cost, ok := ParseCost(c.in)
		if cost != c.cost || ok != c.ok {
			t.Errorf("ParseCost(%q) = %d, %v; want %d, %v", c.in, cost, ok, c.cost, c.ok)
		}
	}
}
