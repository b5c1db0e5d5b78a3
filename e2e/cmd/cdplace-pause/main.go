// Command cdplace-pause is the pod sandbox's pause process for nodes that pull nothing
// (harness.WriteNodeImages): it waits for SIGINT or SIGTERM and exits 0, as upstream's pause does,
// and also serves as the workload pods' container there. Built static (CGO_ENABLED=0).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	<-c
}
