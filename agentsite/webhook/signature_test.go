package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The vectors below were computed outside Go with OpenSSL, e.g.
//
//	printf '%s' "1700000000.$BODY" | openssl dgst -sha256 -hmac 'whsec_test_secret' -r
//
// and for the binary body with printf '1700000000.\xc3\xa9\x00\xff'.
var knownAnswers = []struct {
	name   string
	secret string
	t      int64
	body   []byte
	v1     string
}{
	{
		name:   "lead.created envelope",
		secret: "whsec_test_secret",
		t:      1700000000,
		body:   []byte(`{"id":"evt_1","type":"lead.created","created_at":"2026-11-21T09:00:00.000Z","data":{"site_id":"site_1","lead_id":"lead_1"}}`),
		v1:     "c2807992c496648f76d36232933fdc2ccecd6eefc84d2c9e81ad21736bbf910d",
	},
	{
		name:   "empty body",
		secret: "whsec_test_secret",
		t:      1700000000,
		body:   []byte{},
		v1:     "316b9ab98c15bfa039d243f3196acee619cf29749a91a634e6a8154e2f7b6727",
	},
	{
		name:   "other secret and time",
		secret: "whsec_another",
		t:      1763715600,
		body:   []byte(`{"id":"evt_2","type":"site.published","created_at":"2025-11-21T09:00:00.123Z","data":{"id":"site_9"}}`),
		v1:     "bb9dacc98e369b9c64919e3ee9703daef25744001e4418b1a2dc49b810f30944",
	},
	{
		name:   "non-UTF-8 bytes are signed as they are",
		secret: "whsec_test_secret",
		t:      1700000000,
		body:   []byte{0xc3, 0xa9, 0x00, 0xff},
		v1:     "09876d6c3b0c50bdbd18269a853c4c725dadba07078ec2465092582b61e09c53",
	},
}

func TestSignKnownAnswers(t *testing.T) {
	for _, tc := range knownAnswers {
		t.Run(tc.name, func(t *testing.T) {
			got := Sign(tc.secret, time.Unix(tc.t, 0), tc.body)
			want := "t=" + itoa(tc.t) + ",v1=" + tc.v1
			if got != want {
				t.Errorf("Sign = %q, want %q", got, want)
			}
			idx, err := Verify(tc.body, want, []string{tc.secret}, time.Unix(tc.t, 0), DefaultWindow)
			if err != nil || idx != 0 {
				t.Errorf("Verify(known answer) = %d, %v; want 0, nil", idx, err)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func macRaw(secret string, signed []byte) string {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write(signed)
	return hex.EncodeToString(h.Sum(nil))
}

const goodV1 = "c2807992c496648f76d36232933fdc2ccecd6eefc84d2c9e81ad21736bbf910d"

func TestParseHeaderMalformed(t *testing.T) {
	tests := []struct {
		name, header string
	}{
		{"empty", ""},
		{"garbage", "hello"},
		{"only commas", ",,,"},
		{"trailing comma", "t=1700000000,v1=" + goodV1 + ","},
		{"leading comma", ",t=1700000000,v1=" + goodV1},
		{"empty key", "=1,t=1700000000,v1=" + goodV1},
		{"missing t", "v1=" + goodV1},
		{"repeated t", "t=1700000000,t=1700000000,v1=" + goodV1},
		{"empty t", "t=,v1=" + goodV1},
		{"non-numeric t", "t=abc,v1=" + goodV1},
		{"negative t", "t=-1700000000,v1=" + goodV1},
		{"fractional t", "t=1700000000.5,v1=" + goodV1},
		{"t with space", "t= 1700000000,v1=" + goodV1},
		{"t overflowing", "t=99999999999999999999999,v1=" + goodV1},
		{"t with leading zeros", "t=0001700000000,v1=" + goodV1},
		{"missing v1", "t=1700000000"},
		{"missing v1 with other scheme", "t=1700000000,v0=" + goodV1},
		{"v1 uppercase hex", "t=1700000000,v1=" + strings.ToUpper(goodV1)},
		{"v1 too short", "t=1700000000,v1=" + goodV1[:63]},
		{"v1 too long", "t=1700000000,v1=" + goodV1 + "0"},
		{"v1 empty", "t=1700000000,v1="},
		{"v1 non-hex", "t=1700000000,v1=" + strings.Repeat("g", 64)},
		{"v1 base64", "t=1700000000,v1=wofnksSWZI9200YyIz/cLM7NbvfITSyegK0hc2u/kQ0="},
		{"one good and one bad v1", "t=1700000000,v1=" + goodV1 + ",v1=xyz"},
		{"space separated", "t=1700000000, v1=" + goodV1},
		{"semicolons", "t=1700000000;v1=" + goodV1},
		{"oversized", "t=1700000000,v1=" + goodV1 + strings.Repeat(",x=y", MaxHeaderLen/4)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHeader(tc.header)
			if !errors.Is(err, ErrMalformedHeader) {
				t.Fatalf("ParseHeader(%q) error = %v, want ErrMalformedHeader", tc.header, err)
			}
			_, err = Verify([]byte("{}"), tc.header, []string{"whsec_x"}, time.Unix(1700000000, 0), DefaultWindow)
			if !errors.Is(err, ErrMalformedHeader) {
				t.Fatalf("Verify with header %q error = %v, want ErrMalformedHeader", tc.header, err)
			}
		})
	}
}

func TestParseHeaderAccepts(t *testing.T) {
	tests := []struct {
		name   string
		header string
		ts     int64
		nSigs  int
	}{
		{"canonical", "t=1700000000,v1=" + goodV1, 1700000000, 1},
		{"v1 first", "v1=" + goodV1 + ",t=1700000000", 1700000000, 1},
		{"two v1", "t=1700000000,v1=" + goodV1 + ",v1=" + strings.Repeat("0", 64), 1700000000, 2},
		{"unknown scheme skipped", "t=1700000000,v0=whatever,v1=" + goodV1, 1700000000, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseHeader(tc.header)
			if err != nil {
				t.Fatalf("ParseHeader(%q): %v", tc.header, err)
			}
			if h.Timestamp != tc.ts || len(h.Signatures) != tc.nSigs {
				t.Errorf("got t=%d, %d signatures; want t=%d, %d", h.Timestamp, len(h.Signatures), tc.ts, tc.nSigs)
			}
		})
	}
}

func TestVerifyWindow(t *testing.T) {
	body := []byte(`{"id":"evt_w","type":"lead.created"}`)
	const secret = "whsec_window"
	signedAt := time.Unix(1_800_000_000, 0)
	header := Sign(secret, signedAt, body)
	tests := []struct {
		name    string
		offset  time.Duration // receiver clock minus signing time
		wantErr error
	}{
		{"same second", 0, nil},
		{"299 s old", 299 * time.Second, nil},
		{"exactly 300 s old", 300 * time.Second, nil},
		{"300.9 s old", 300*time.Second + 900*time.Millisecond, ErrTimestampOutsideWindow},
		{"301 s old", 301 * time.Second, ErrTimestampOutsideWindow},
		{"a day old", 24 * time.Hour, ErrTimestampOutsideWindow},
		{"299 s in the future", -299 * time.Second, nil},
		{"301 s in the future", -301 * time.Second, ErrTimestampOutsideWindow},
		{"a day in the future", -24 * time.Hour, ErrTimestampOutsideWindow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify(body, header, []string{secret}, signedAt.Add(tc.offset), DefaultWindow)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("Verify at %s: error = %v, want %v", tc.offset, err, tc.wantErr)
			}
		})
	}
	// A narrower window is honoured too.
	if _, err := Verify(body, header, []string{secret}, signedAt.Add(11*time.Second), 10*time.Second); !errors.Is(err, ErrTimestampOutsideWindow) {
		t.Errorf("11 s with a 10 s window: error = %v, want ErrTimestampOutsideWindow", err)
	}
}

func TestVerifySecretsAndSignatures(t *testing.T) {
	body := []byte(`{"id":"evt_m","type":"knowledge.ready","created_at":"2026-11-21T09:00:00.000Z","data":{}}`)
	now := time.Unix(1_800_000_000, 0)
	oldSig := Sign("whsec_old", now, body)
	newSig := Sign("whsec_new", now, body)
	_, newV1, _ := strings.Cut(newSig, ",")
	both := oldSig + "," + newV1 // t=...,v1=<old>,v1=<new>
	wrong := Sign("whsec_wrong", now, body)

	tests := []struct {
		name    string
		header  string
		secrets []string
		body    []byte
		want    int
		wantErr error
	}{
		{"one secret matches", oldSig, []string{"whsec_old"}, body, 0, nil},
		{"second secret matches", newSig, []string{"whsec_old", "whsec_new"}, body, 1, nil},
		{"first secret matches of two", oldSig, []string{"whsec_old", "whsec_new"}, body, 0, nil},
		{"second v1 matches", both, []string{"whsec_new"}, body, 0, nil},
		{"wrong secret", wrong, []string{"whsec_old", "whsec_new"}, body, -1, ErrNoValidSignature},
		{"no secrets", oldSig, nil, body, -1, ErrNoValidSignature},
		{"body altered by a proxy", oldSig, []string{"whsec_old"}, append(bytes.Clone(body), '\n'), -1, ErrNoValidSignature},
		{"body re-encoded", oldSig, []string{"whsec_old"}, bytes.ReplaceAll(body, []byte(`":"`), []byte(`": "`)), -1, ErrNoValidSignature},
		{"secret without prefix", oldSig, []string{"old"}, body, -1, ErrNoValidSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Verify(tc.body, tc.header, tc.secrets, now, DefaultWindow)
			if got != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("Verify = %d, %v; want %d, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestVerifyWrongConcatenation(t *testing.T) {
	// A signer that forgets the period, or puts the body first, must fail.
	body := []byte(`{"id":"evt_c"}`)
	now := time.Unix(1_800_000_000, 0)
	for name, signed := range map[string]string{
		"no period":    "1800000000" + string(body),
		"body first":   string(body) + ".1800000000",
		"milliseconds": "1800000000000." + string(body),
	} {
		t.Run(name, func(t *testing.T) {
			sum := macRaw("whsec_c", []byte(signed))
			header := "t=1800000000,v1=" + sum
			if _, err := Verify(body, header, []string{"whsec_c"}, now, DefaultWindow); !errors.Is(err, ErrNoValidSignature) {
				t.Errorf("error = %v, want ErrNoValidSignature", err)
			}
		})
	}
}

func TestVerifyEnvelope(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	const secret = "whsec_env"
	tests := []struct {
		name    string
		body    string
		header  string // empty means a valid signature of body
		wantErr error
	}{
		{"valid", `{"id":"evt_1","type":"lead.created","created_at":"2026-11-21T09:00:00.000Z","data":{"site_id":"s","lead_id":"l"},"extra":1}`, "", nil},
		{"bad signature is not parsed", `not json`, "t=1800000000,v1=" + goodV1, ErrNoValidSignature},
		{"not JSON", `not json`, "", ErrMalformedBody},
		{"id without evt_", `{"id":"1","type":"lead.created","created_at":"2026-11-21T09:00:00.000Z","data":{}}`, "", ErrMalformedBody},
		{"no type", `{"id":"evt_1","created_at":"2026-11-21T09:00:00.000Z","data":{}}`, "", ErrMalformedBody},
		{"bad created_at", `{"id":"evt_1","type":"lead.created","created_at":"yesterday","data":{}}`, "", ErrMalformedBody},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			header := tc.header
			if header == "" {
				header = Sign(secret, now, []byte(tc.body))
			}
			env, _, err := VerifyEnvelope([]byte(tc.body), header, []string{secret}, now, DefaultWindow)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil {
				if env.ID != "evt_1" || env.Type != LeadCreated || string(env.Data) != `{"site_id":"s","lead_id":"l"}` {
					t.Errorf("envelope = %+v", env)
				}
				if want := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC); !env.CreatedAt.Equal(want) {
					t.Errorf("created_at = %v, want %v", env.CreatedAt, want)
				}
			}
		})
	}
}

func TestEnvelopeMarshalMilliseconds(t *testing.T) {
	env := Envelope{ID: "evt_x", Type: LeadCreated, CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)), Data: []byte(`{"a":1}`)}
	b, err := env.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"evt_x","type":"lead.created","created_at":"2026-01-02T02:04:05.000Z","data":{"a":1}}`
	if string(b) != want {
		t.Errorf("got %s\nwant %s", b, want)
	}
}

func TestEventTypes(t *testing.T) {
	for _, et := range EventTypes() {
		if !et.Known() || et.Retired() {
			t.Errorf("%s: Known=%v Retired=%v", et, et.Known(), et.Retired())
		}
	}
	if DomainActivated.Known() || !DomainActivated.Retired() {
		t.Errorf("domain.activated must be retired and not known")
	}
	if EventType("lead.deleted").Known() {
		t.Errorf("an invented type must not be known")
	}
}
