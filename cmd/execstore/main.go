package main

import (
	"context"
	"os"
	"os/signal"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], environment{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, now: time.Now})
	stop()
	os.Exit(code)
}
