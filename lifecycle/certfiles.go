package lifecycle

import (
	"crypto/tls"
	"errors"
	"strconv"

	"sluice/config"
	"sluice/tlsedge"
)

// loadCerts loads the TLS listener's certificates as cfg names them, the one
// way the gateway and `sluice validate` both read them. Files that do not
// load, at start or at a renewal, are errors at their lines in cfg's file
// (certErrors), in the log as in /api/rules.
func loadCerts(cfg *config.Config) (*tlsedge.Store, error) {
	tc := cfg.TLS
	opts := tlsedge.Options{Dir: cfg.File("."), MinVersion: tls.VersionTLS12, ClientCAFile: tc.ClientCAFile, StrictSNI: tc.StrictSNI}
	if tc.MinVersion == "1.3" {
		opts.MinVersion = tls.VersionTLS13
	}
	for _, c := range tc.Certificates {
		opts.Pairs = append(opts.Pairs, tlsedge.Pair{CertFile: c.CertFile, KeyFile: c.KeyFile})
	}
	opts.NextProtos = []string{"http/1.1"}
	if cfg.HTTP2.OverTLS() {
		opts.NextProtos = []string{"h2", "http/1.1"}
	}
	opts.Locate = func(err error) error { return certErrors(cfg, err) }
	return tlsedge.New(opts)
}

// certErrors names each pair or client CA in err (tlsedge.FileError) at
// its line in cfg's file, as a rules file's errors are: FILE:LINE:
// tls.certificates[i]: the files and what is wrong with them. Other errors
// are returned as they are.
func certErrors(cfg *config.Config, err error) error {
	if err == nil {
		return err
	}
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	var out config.Errors
	for _, e := range list {
		var fe *tlsedge.FileError
		if !errors.As(e, &fe) {
			return err
		}
		ce := config.Error{File: cfg.Path, Line: cfg.TLS.ClientCAFileLine, Field: "tls.clientCAFile", Msg: fe.Err.Error()}
		if fe.Pair >= 0 && fe.Pair < len(cfg.TLS.Certificates) {
			ce.Line, ce.Field = cfg.TLS.Certificates[fe.Pair].Line, "tls.certificates["+strconv.Itoa(fe.Pair)+"]"
		}
		out = append(out, ce)
	}
	return out
}
