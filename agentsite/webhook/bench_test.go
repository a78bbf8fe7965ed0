package webhook

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

func BenchmarkVerify(b *testing.B) {
	now := time.Unix(1_800_000_000, 0)
	for _, size := range []int{1 << 10, 64 << 10} {
		body := bytes.Repeat([]byte("a"), size)
		header := Sign("whsec_bench", now, body)
		for _, nSecrets := range []int{1, 2} {
			secrets := []string{"whsec_bench"}
			if nSecrets == 2 {
				// The matching secret second: the rotation overlap case.
				secrets = []string{"whsec_old", "whsec_bench"}
			}
			b.Run(fmt.Sprintf("body=%dKiB/secrets=%d", size>>10, nSecrets), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(size))
				for b.Loop() {
					if _, err := Verify(body, header, secrets, now, DefaultWindow); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
