package admin

// NodeStats are one statistics node's numbers now, as the limiter's windows
// see them.
type NodeStats struct {
	PassQps     float64 `json:"passQps"`
	BlockQps    float64 `json:"blockQps"`
	SuccessQps  float64 `json:"successQps"`
	ErrorQps    float64 `json:"errorQps"`
	AvgRtMs     float64 `json:"avgRtMs"`
	Concurrency int64   `json:"concurrency"`
}

// NamedStats are the numbers of one origin or entrance of a resource.
type NamedStats struct {
	Name string `json:"name"`
	NodeStats
}

// ResourceStats are a resource's numbers now, in total and per origin and
// entrance. Served as JSON by /api/resources with NodeStats' fields inline.
type ResourceStats struct {
	Resource string `json:"resource"`
	NodeStats
	Origins   []NamedStats `json:"origins"`
	Entrances []NamedStats `json:"entrances"`
}
