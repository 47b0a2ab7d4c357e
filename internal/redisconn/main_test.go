package redisconn_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial through its process-wide logger; the
	// tests kill Redis on purpose.
	redis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
