// acker: the floor of a sync publish's round trip for any streaming server that runs
// beside a separate nats-server, as stanpkg's does. It answers connect, ping and close,
// and acknowledges every PubMsg at once: no store, no channel, no subscription state.
// bench/side_by_side.py --floor runs it as the side "acker-ns"; build it with
// build_acker.sh (the reference's vendored nats.go and stan.go/pb, no network).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/stan.go/pb"
)

func main() {
	url, cid := "", ""
	for i := 1; i+1 < len(os.Args); i++ { // the harness's server flags; only these matter
		switch os.Args[i] {
		case "-ns":
			url = os.Args[i+1]
		case "-cid":
			cid = os.Args[i+1]
		}
	}
	nc, err := nats.Connect(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	prefix := "_STAN.acker."
	reply := func(subject string, answer func(data []byte) ([]byte, error)) {
		nc.Subscribe(subject, func(m *nats.Msg) {
			if out, err := answer(m.Data); err == nil {
				nc.Publish(m.Reply, out)
			}
		})
	}
	reply("_STAN.discover."+cid, func([]byte) ([]byte, error) {
		return (&pb.ConnectResponse{
			PubPrefix: prefix + "pub", SubRequests: prefix + "sub",
			UnsubRequests: prefix + "unsub", CloseRequests: prefix + "close",
			SubCloseRequests: prefix + "subclose", PingRequests: prefix + "ping",
			PingInterval: 5, PingMaxOut: 3, Protocol: 1,
		}).Marshal()
	})
	reply(prefix+"pub.>", func(data []byte) ([]byte, error) {
		msg := &pb.PubMsg{}
		if err := msg.Unmarshal(data); err != nil {
			return nil, err
		}
		return (&pb.PubAck{Guid: msg.Guid}).Marshal()
	})
	reply(prefix+"close", func([]byte) ([]byte, error) { return (&pb.CloseResponse{}).Marshal() })
	reply(prefix+"ping", func([]byte) ([]byte, error) { return (&pb.PingResponse{}).Marshal() })
	if err := nc.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "Streaming Server is ready") // what the harness waits for
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	nc.Close()
}
