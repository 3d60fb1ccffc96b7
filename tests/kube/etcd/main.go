// Command etcd is the etcd server of the pinned release, built here so that the tests' control
// plane comes from one Go module with the Kubernetes components.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
