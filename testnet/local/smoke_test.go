package local

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/skiprange/skiprange/client"
	"github.com/skiprange/skiprange/overlay/pb"
)

func TestSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nw, err := Start(ctx, 8, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Close()
	c, err := client.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	entry, _ := nw.Entry()
	for i := 0; i < 100; i++ {
		if _, err := c.Put(ctx, entry, []byte(fmt.Sprintf("k%04d", i)), []byte(fmt.Sprint(i))); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	for i, r := range nw.Running() {
		rep, err := c.Get(ctx, r.AddrInfo(), []byte(fmt.Sprintf("k%04d", i*7)))
		if err != nil || rep.Status != pb.Status_STATUS_OK || string(rep.Value) != fmt.Sprint(i*7) {
			t.Fatalf("get via node %d: %v %v", i, rep, err)
		}
	}
	ring, err := c.Ring(ctx, entry, 100)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ring: %d nodes, %d items, issues %v", len(ring.Nodes), ring.TotalItems(), append(ring.Errors(), ring.Warnings()...))
}
