package redisconn_test

import (
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"sluice/internal/redistest"
	"sluice/internal/skipped"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial through its process-wide logger; the
	// tests kill Redis on purpose.
	redis.SetLogger(redistest.QuietLogger{})
	os.Exit(skipped.Main(m).Run())
}
