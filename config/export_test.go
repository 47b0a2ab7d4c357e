package config

// ParseAnySize is Parse without the MaxDocumentBytes limit, for the load
// benchmark: 100,000 routes with their rules do not fit in 8 MiB, and
// that a load is linear shows past the limit too.
func ParseAnySize(path string, data []byte) (*Config, error) {
	root, errs := decodeRoot(path, data, "file")
	if errs != nil {
		return nil, errs
	}
	return parseFile(path, root, Overrides{})
}
