// Command portserver is what the port tests run inside a session: an HTTP
// server that answers with what it was sent (method, path, query,
// headers) as JSON and echoes WebSocket messages at /ws, and a raw TCP
// echo server.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"log"
	"net"
	"net/http"

	"github.com/coder/websocket"
)

func main() {
	httpAddr := flag.String("http", "127.0.0.1:8000", "address of the HTTP server")
	echoAddr := flag.String("echo", "", "address of the TCP echo server (none if empty)")
	flag.Parse()
	if *echoAddr != "" {
		ln, err := net.Listen("tcp", *echoAddr)
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { io.Copy(c, c); c.Close() }()
			}
		}()
	}
	http.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(1 << 20)
		for {
			typ, b, err := c.Read(context.Background())
			if err != nil {
				return
			}
			if err := c.Write(context.Background(), typ, b); err != nil {
				return
			}
		}
	})
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"method": r.Method, "path": r.URL.Path, "raw_query": r.URL.RawQuery, "host": r.Host,
			"header": r.Header, "body": string(body),
		})
	})
	log.Fatal(http.ListenAndServe(*httpAddr, nil))
}
