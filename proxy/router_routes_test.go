package proxy

// everyRoute lists the routes of rr once each, whatever the methods they
// serve (tests replace their forwarders or guards).
func (rr *router) everyRoute() []*route {
	var list []*route
	seen := map[*route]bool{}
	for _, byPattern := range rr.routes {
		for _, rt := range byPattern {
			if !seen[rt] {
				seen[rt] = true
				list = append(list, rt)
			}
		}
	}
	return list
}
