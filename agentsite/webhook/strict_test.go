package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"testing"
	"time"
)

// macHex is the v1 of body signed with secret over the timestamp text t,
// computed here apart from Sign.
func macHex(secret, t string, body []byte) string {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(t + "."))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// TestMACOverTheRawTimestampText checks that the MAC covers t exactly as
// the header wrote it: another spelling of the same number (leading zeros)
// never verifies, whichever text it was signed over.
func TestMACOverTheRawTimestampText(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	const secret = "whsec_raw_t"
	body := []byte(`{"id":"evt_1","type":"lead.created","created_at":"2026-11-21T09:00:00.000Z","data":{}}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	tests := []struct {
		name   string
		header string
		ok     bool
	}{
		{"as the sender signs it", "t=" + ts + ",v1=" + macHex(secret, ts, body), true},
		{"leading zeros, signed over the canonical text", "t=000" + ts + ",v1=" + macHex(secret, ts, body), false},
		{"leading zeros, signed over the zeros", "t=000" + ts + ",v1=" + macHex(secret, "000"+ts, body), false},
		{"one leading zero", "t=0" + ts + ",v1=" + macHex(secret, ts, body), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify(body, tc.header, []string{secret}, now, DefaultWindow)
			if tc.ok != (err == nil) {
				t.Fatalf("Verify(%s) = %v, want ok=%v", tc.name, err, tc.ok)
			}
			if !tc.ok && !errors.Is(err, ErrMalformedHeader) {
				t.Errorf("error %v does not wrap ErrMalformedHeader", err)
			}
		})
	}
	// t=0 itself is a number without a leading zero (and far outside any
	// window).
	if _, err := Check("t=0,v1="+goodV1, now, DefaultWindow); !errors.Is(err, ErrTimestampOutsideWindow) {
		t.Errorf("t=0: %v, want outside the window", err)
	}
}

// TestCheckNeedsNoBody checks what a receiver learns before it reads a
// body.
func TestCheckNeedsNoBody(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	if _, err := Check("t=1,v1=x", now, DefaultWindow); !errors.Is(err, ErrMalformedHeader) {
		t.Errorf("junk header: %v", err)
	}
	if _, err := Check("t=1,v1="+goodV1, now, DefaultWindow); !errors.Is(err, ErrTimestampOutsideWindow) {
		t.Errorf("stale header: %v", err)
	}
	h, err := Check("t=1800000000,v1="+goodV1, now, DefaultWindow)
	if err != nil || h.TimestampText != "1800000000" {
		t.Fatalf("good header: %+v, %v", h, err)
	}
	if _, err := h.Match([]byte("{}"), []string{"whsec_x"}); !errors.Is(err, ErrNoValidSignature) {
		t.Errorf("Match of a wrong signature: %v", err)
	}
}

func TestDecodeEnvelopeStrict(t *testing.T) {
	const tail = `"created_at":"2026-11-21T09:00:00.000Z"`
	tests := []struct {
		name string
		body string
		ok   bool
	}{
		{"plain", `{"id":"evt_1","type":"lead.created",` + tail + `,"data":{"site_id":"s","lead_id":"l"}}`, true},
		{"unknown fields, nested objects and arrays", `{"id":"evt_1","type":"lead.created",` + tail + `,"data":{"site_id":"s","extra":{"a":[{"b":1},{"b":2}]},"n":1e999},"more":null}`, true},
		{"data with an id of its own", `{"id":"evt_1","type":"site.published",` + tail + `,"data":{"id":"site_9"}}`, true},
		{"duplicate id", `{"id":"evt_1","id":"evt_2","type":"lead.created",` + tail + `,"data":{}}`, false},
		{"id and ID", `{"id":"evt_1","ID":"evt_2","type":"lead.created",` + tail + `,"data":{}}`, false},
		{"ID alone", `{"ID":"evt_1","type":"lead.created",` + tail + `,"data":{}}`, false},
		{"Type alone", `{"id":"evt_1","Type":"lead.created",` + tail + `,"data":{}}`, false},
		{"duplicate data", `{"id":"evt_1","type":"lead.created",` + tail + `,"data":{},"data":{"site_id":"s"}}`, false},
		{"duplicate site_id", `{"id":"evt_1","type":"lead.created",` + tail + `,"data":{"site_id":"a","site_id":"b"}}`, false},
		{"site_id and SITE_ID", `{"id":"evt_1","type":"lead.created",` + tail + `,"data":{"site_id":"a","SITE_ID":"b"}}`, false},
		{"Site_Id alone", `{"id":"evt_1","type":"lead.created",` + tail + `,"data":{"Site_Id":"a"}}`, false},
		{"long s folds to s", `{"id":"evt_1","type":"lead.created",` + tail + `,"data":{"\u017fite_id":"a"}}`, false},
		{"duplicate deep inside data", `{"id":"evt_1","type":"lead.created",` + tail + `,"data":{"x":[{"k":1,"K":2}]}}`, false},
		{"trailing value", `{"id":"evt_1","type":"lead.created",` + tail + `,"data":{}} {}`, false},
		{"not an object", `["evt_1"]`, false},
		{"bad created_at", `{"id":"evt_1","type":"lead.created","created_at":"2026-13-45T00:00:00.000Z","data":{}}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeEnvelope([]byte(tc.body))
			if tc.ok != (err == nil) {
				t.Fatalf("DecodeEnvelope = %v, want ok=%v", err, tc.ok)
			}
			if !tc.ok && !errors.Is(err, ErrMalformedBody) {
				t.Errorf("error %v does not wrap ErrMalformedBody", err)
			}
		})
	}
}
