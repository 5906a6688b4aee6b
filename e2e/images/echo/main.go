// Command echo is the real-node suite's game server: it answers every UDP datagram and every
// line over TCP on its port with "<pod name>: <what it got>", so a client that reaches the
// address a pod's network-status announces can tell which pod answered. Built into an image
// by `hack/image -test-images` (static, no shell).
//
//	echo -port 7777   (POD_NAME from the downward API names the pod)
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

func main() {
	port := flag.Int("port", 7777, "The UDP and TCP port to answer on.")
	flag.Parse()
	name := os.Getenv("POD_NAME")
	addr := ":" + strconv.Itoa(*port)
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		log.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(fmt.Sprintf("%s: %s", name, buf[:n])), from)
		}
	}()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := fmt.Fprintf(c, "%s: %s\n", name, sc.Text()); err != nil {
						return
					}
				}
			}(c)
		}
	}()
	log.Printf("echo: answering on UDP and TCP %s as %q", addr, name)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
