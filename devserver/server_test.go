package devserver

import (
	"strings"
	"testing"
)

func TestStockFromEnvironment(t *testing.T) {
	t.Setenv(stockEnv, "1")
	o, err := Options{}.withDefaults()
	if err != nil || !o.Stock {
		t.Fatalf("%s=1: Stock = %v, err %v; want true, nil", stockEnv, o.Stock, err)
	}
	t.Setenv(stockEnv, "yes")
	if _, err := (Options{}).withDefaults(); err == nil || !strings.Contains(err.Error(), stockEnv) {
		t.Fatalf("%s=yes: err = %v, want an error naming the variable", stockEnv, err)
	}
	t.Setenv(stockEnv, "")
	if o, err := (Options{}).withDefaults(); err != nil || o.Stock {
		t.Fatalf("%s unset: Stock = %v, err %v; want false, nil", stockEnv, o.Stock, err)
	}
}
