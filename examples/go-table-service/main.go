// A table service in Go: rounds of Gnau for one table through the dealer, as
// docs/integration.md says.
//
// At start-up it puts its table in the operator's catalogue (PutTable: a round is dealt only at
// a catalogued table; the same configuration again changes nothing). Then, for each round:
//  1. Shuffle, and show the commitment to the table before any bet is taken;
//  2. Deal the locked bets (the seats);
//  3. Reveal, and check with crypto/sha256 that the revealed server seed opens the commitment
//     shown at step 1 (docs/fairness.md, "Step 1: commit");
//  4. Settle, and check that the seats' deltas and the dealer's sum to zero.
//
// Every change has its own request id (a UUID4), chosen once and kept across retries; a call
// that fails with UNAVAILABLE or DEADLINE_EXCEEDED is retried with the same request id after
// an exponential, jittered backoff. Every other refusal is read by its google.rpc.ErrorInfo
// reason (status.FromError, st.Details()): TABLE_BUSY voids the unfinished round it names,
// ROUND_STATE looks the round up with GetRound and goes on from its state, anything else ends
// the run. One JSON object per line on stdout, one per event.
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	mathrand "math/rand"
	"os"
	"sort"
	"strconv"
	"time"

	gnauv1 "github.com/gnau-dealer/gnau/gen/go/gnau/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const (
	initialBackoff = 100 * time.Millisecond
	maxBackoff     = 2 * time.Second
)

var (
	target      = flag.String("target", envOr("GNAU_TARGET", "127.0.0.1:50051"), "the dealer's HOST:PORT (or $GNAU_TARGET)")
	table       = flag.String("table", "table-1", "the table id")
	rounds      = flag.Int("rounds", 1, "how many rounds to play")
	maxAttempts = flag.Int("max-attempts", 8, "attempts of a call before giving up on UNAVAILABLE or DEADLINE_EXCEEDED")
	deadline    = flag.Duration("deadline", 5*time.Second, "the deadline of each call")
	token       = os.Getenv("GNAU_TOKEN") // the operator's bearer token
	jitter      = mathrand.New(mathrand.NewSource(time.Now().UnixNano()))
)

func envOr(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

// emit prints one event as a line of JSON.
func emit(event string, fields map[string]interface{}) {
	fields["event"] = event
	line, err := json.Marshal(fields)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(line))
}

// newRequestID is a random UUID4: one per intended change, kept across its retries.
func newRequestID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// -- status and ErrorInfo -----------------------------------------------------------------

// refusal is what a failed call said: its code and, when the dealer sent one, its ErrorInfo.
type refusal struct {
	code     codes.Code
	message  string
	reason   string // ErrorInfo.reason; "" for statuses gRPC itself produced
	metadata map[string]string
}

func (r *refusal) Error() string {
	return fmt.Sprintf("%s (%s): %s", codeName(r.code), r.reason, r.message)
}

// readRefusal reads the status of a failed call and the google.rpc.ErrorInfo among its
// details (the grpc-status-details-bin trailer, decoded by grpc-go).
func readRefusal(err error) *refusal {
	st, ok := status.FromError(err)
	if !ok {
		return &refusal{code: codes.Unknown, message: err.Error()}
	}
	r := &refusal{code: st.Code(), message: st.Message()}
	for _, detail := range st.Details() {
		if info, ok := detail.(*errdetails.ErrorInfo); ok && info.GetDomain() == "gnau.dealer" {
			r.reason = info.GetReason()
			r.metadata = info.GetMetadata()
		}
	}
	return r
}

// codeName is a code's canonical name, as docs/integration.md writes it (grpc-go's
// Code.String() says "Unavailable").
func codeName(code codes.Code) string {
	names := []string{
		"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
		"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
		"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
	}
	if int(code) < len(names) {
		return names[code]
	}
	return code.String()
}

// retryable: the outcome of the change is unknown; the same request answers it.
func retryable(code codes.Code) bool {
	return code == codes.Unavailable || code == codes.DeadlineExceeded
}

// call makes one unary call with the token and a deadline, retried on UNAVAILABLE and
// DEADLINE_EXCEEDED with the request (and so its request id) unchanged. Waits between
// attempts grow 0.1 s, 0.2 s, 0.4 s, ... up to 2 s, half of each at random.
func call[Req, Resp any](method string, do func(context.Context, Req, ...grpc.CallOption) (Resp, error), request Req) (Resp, error) {
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), *deadline)
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		response, err := do(ctx, request)
		cancel()
		if err == nil {
			return response, nil
		}
		r := readRefusal(err)
		if !retryable(r.code) || attempt >= *maxAttempts {
			return response, r
		}
		limit := initialBackoff << (attempt - 1)
		if limit > maxBackoff || limit <= 0 {
			limit = maxBackoff
		}
		wait := limit/2 + time.Duration(jitter.Int63n(int64(limit/2)+1))
		emit("retry", map[string]interface{}{
			"method": method, "attempt": attempt, "code": codeName(r.code), "wait_ms": wait.Milliseconds(),
		})
		time.Sleep(wait)
	}
}

// -- the commitment -----------------------------------------------------------------------

func frame(data []byte) []byte {
	out := make([]byte, 4, 4+len(data))
	binary.BigEndian.PutUint32(out, uint32(len(data)))
	return append(out, data...)
}

// houseRulesText is each rule as docs/fairness.md writes it (KEY=VALUE on the command line),
// every rule present, unset ones at their defaults.
func houseRulesText(rules *gnauv1.HouseRules) map[string]string {
	flag := func(value *bool, fallback bool) string {
		if value != nil {
			return strconv.FormatBool(*value)
		}
		return strconv.FormatBool(fallback)
	}
	decks := int32(1)
	if rules.Decks != nil {
		decks = *rules.Decks
	}
	payout := map[gnauv1.PayoutTable]string{
		gnauv1.PayoutTable_PAYOUT_TABLE_UNSPECIFIED: "points",
		gnauv1.PayoutTable_PAYOUT_TABLE_POINTS:      "points",
		gnauv1.PayoutTable_PAYOUT_TABLE_MULTIPLIER:  "multiplier",
	}[rules.GetPayout()]
	tie := map[gnauv1.TieRule]string{
		gnauv1.TieRule_TIE_RULE_UNSPECIFIED: "dealer",
		gnauv1.TieRule_TIE_RULE_DEALER:      "dealer",
		gnauv1.TieRule_TIE_RULE_PUSH:        "push",
		gnauv1.TieRule_TIE_RULE_HIGH_CARD:   "high_card",
	}[rules.GetTie()]
	return map[string]string{
		"decks":          strconv.Itoa(int(decks)),
		"five_small":     flag(rules.FiveSmall, true),
		"payout":         payout,
		"suited_double":  flag(rules.SuitedDouble, false),
		"ten_is_duke":    flag(rules.TenIsDuke, false),
		"three_six_pair": flag(rules.ThreeSixPair, false),
		"tie":            tie,
		"trips_make_ox":  flag(rules.TripsMakeOx, true),
	}
}

// commitment is SHA-256( frame(tag) || frame(round_id) || frame(house_rules)
// || frame(uint64(decks)) || frame(server_seed) ), house_rules being each rule's framed key and
// framed value text, keys in sorted byte order.
func commitment(version, roundID string, rules *gnauv1.HouseRules, serverSeed []byte) []byte {
	text := houseRulesText(rules)
	keys := make([]string, 0, len(text))
	for key := range text {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	var encoded []byte
	for _, key := range keys {
		encoded = append(encoded, frame([]byte(key))...)
		encoded = append(encoded, frame([]byte(text[key]))...)
	}
	decks, _ := strconv.ParseUint(text["decks"], 10, 64)
	var deckCount [8]byte
	binary.BigEndian.PutUint64(deckCount[:], decks)
	var preimage []byte
	for _, field := range [][]byte{
		[]byte("gnau-dealer/fairness/" + version + "/commitment"), []byte(roundID), encoded,
		deckCount[:], serverSeed,
	} {
		preimage = append(preimage, frame(field)...)
	}
	digest := sha256.Sum256(preimage)
	return digest[:]
}

// openedVersion is the fairness version ("v3", or "v2", "v1" for older rounds) whose commitment the
// revealed seed opens, or "" if it opens none: then the dealer changed the seed.
func openedVersion(shown string, round *gnauv1.Round) string {
	seed, err := hex.DecodeString(round.GetServerSeed())
	if err != nil || len(seed) != 32 {
		return ""
	}
	for _, version := range []string{"v3", "v2", "v1"} {
		if hex.EncodeToString(commitment(version, round.GetRoundId(), round.GetHouseRules(), seed)) == shown {
			return version
		}
	}
	return ""
}

// -- the round ------------------------------------------------------------------------------

type player struct {
	id    string
	stake int64
}

var players = []player{{"player-ana", 100}, {"player-bo", 250}, {"player-chi", 40}}

// tableConfig is what the table deals under (docs/api.md, "Tables"): euro stakes of 1 cent to
// 100 euro, the default house rules (the Shuffle's), at most 6 seats, the dealer's deadlines.
var tableConfig = &gnauv1.TableConfig{
	Currency: "EUR", RuleSets: []*gnauv1.HouseRules{{}}, MinStake: 1, MaxStake: 10000, MaxSeats: 6,
	Enabled: true,
}

// catalogue puts the table in the operator's catalogue as this service deals at it. PutTable
// is idempotent, so it is safe at every start and to retry.
func catalogue(dealer gnauv1.DealerServiceClient) error {
	response, err := call("PutTable", dealer.PutTable, &gnauv1.PutTableRequest{TableId: *table, Config: tableConfig})
	if err != nil {
		return err
	}
	emit("table", map[string]interface{}{"table_id": response.GetTable().GetTableId(), "version": response.GetTable().GetVersion()})
	return nil
}

// shuffle opens the table's next round. A table left busy by an earlier run (TABLE_BUSY)
// has its unfinished round, named in the ErrorInfo's metadata, voided first.
func shuffle(dealer gnauv1.DealerServiceClient) (*gnauv1.Round, error) {
	request := &gnauv1.ShuffleRequest{RequestId: newRequestID(), TableId: *table}
	response, err := call("Shuffle", dealer.Shuffle, request)
	var r *refusal
	if errors.As(err, &r) && r.reason == "TABLE_BUSY" {
		unfinished := r.metadata["round_id"]
		_, err = call("VoidRound", dealer.VoidRound, &gnauv1.VoidRoundRequest{
			RequestId: newRequestID(), RoundId: unfinished,
			ReasonCode: gnauv1.VoidReason_VOID_REASON_PLATFORM_FAILURE,
			Reason:     "left unfinished by an earlier run of the table service",
		})
		if err != nil {
			return nil, err
		}
		emit("voided_unfinished", map[string]interface{}{"round_id": unfinished, "state": r.metadata["state"]})
		response, err = call("Shuffle", dealer.Shuffle, request) // the same request: its id was never used
	}
	if err != nil {
		return nil, err
	}
	return response.GetRound(), nil
}

// orLookUp turns a ROUND_STATE refusal into the round as GetRound finds it, when it is
// already at (or past) the state the step moves it to: another process of ours did the step.
func orLookUp(dealer gnauv1.DealerServiceClient, roundID string, reached gnauv1.RoundState, round *gnauv1.Round, err error) (*gnauv1.Round, error) {
	var r *refusal
	if !errors.As(err, &r) || r.reason != "ROUND_STATE" {
		return round, err
	}
	found, lookUpErr := call("GetRound", dealer.GetRound, &gnauv1.GetRoundRequest{RoundId: roundID})
	if lookUpErr != nil {
		return nil, lookUpErr
	}
	if state := found.GetRound().GetState(); state < reached || state == gnauv1.RoundState_ROUND_STATE_VOIDED {
		return nil, err
	}
	return found.GetRound(), nil
}

func playRound(dealer gnauv1.DealerServiceClient) error {
	round, err := shuffle(dealer)
	if err != nil {
		return err
	}
	roundID, shown := round.GetRoundId(), round.GetCommitment()
	// Shown to the table before the betting window opens.
	emit("commitment", map[string]interface{}{"round_id": roundID, "commitment": shown})

	seats := make([]*gnauv1.Seat, len(players))
	for i, p := range players {
		seats[i] = &gnauv1.Seat{SeatNumber: int32(i + 1), PlayerId: p.id, Stake: p.stake}
	}
	emit("bets_locked", map[string]interface{}{"round_id": roundID, "seats": len(seats)})
	dealt, err := call("Deal", dealer.Deal, &gnauv1.DealRequest{RequestId: newRequestID(), RoundId: roundID, Seats: seats})
	round, err = orLookUp(dealer, roundID, gnauv1.RoundState_ROUND_STATE_DEALT, dealt.GetRound(), err)
	if err != nil {
		return err
	}
	emit("dealt", map[string]interface{}{"round_id": roundID, "transcript_hash": round.GetTranscriptHash()})

	revealed, err := call("Reveal", dealer.Reveal, &gnauv1.RevealRequest{RequestId: newRequestID(), RoundId: roundID})
	round, err = orLookUp(dealer, roundID, gnauv1.RoundState_ROUND_STATE_REVEALED, revealed.GetRound(), err)
	if err != nil {
		return err
	}
	version := openedVersion(shown, round)
	if version == "" {
		return fmt.Errorf("round %s: the revealed server seed does not open the commitment %s", roundID, shown)
	}
	emit("revealed", map[string]interface{}{
		"round_id": roundID, "server_seed": round.GetServerSeed(), "commitment_opens": true,
		"fairness_version": version,
	})

	settled, err := call("Settle", dealer.Settle, &gnauv1.SettleRequest{RequestId: newRequestID(), RoundId: roundID})
	round, err = orLookUp(dealer, roundID, gnauv1.RoundState_ROUND_STATE_SETTLED, settled.GetRound(), err)
	if err != nil {
		return err
	}
	settlement := round.GetSettlement()
	sum := settlement.GetDealerDelta()
	var results []map[string]interface{}
	for _, result := range settlement.GetSeatResults() {
		sum += result.GetDelta()
		results = append(results, map[string]interface{}{
			"seat": result.GetSeatNumber(), "outcome": result.GetOutcome().String(), "delta": result.GetDelta(),
		})
	}
	emit("settled", map[string]interface{}{
		"round_id": roundID, "results": results, "dealer_delta": settlement.GetDealerDelta(), "sum": sum,
	})
	if sum != 0 {
		return fmt.Errorf("round %s: the deltas sum to %d, not 0", roundID, sum)
	}
	return nil
}

func main() {
	flag.Parse()
	connection, err := grpc.Dial(*target, grpc.WithInsecure(), grpc.WithConnectParams(grpc.ConnectParams{
		// Reconnect as often as the calls retry (grpc-go's default waits up to 120 s).
		Backoff:           backoff.Config{BaseDelay: initialBackoff, Multiplier: 1.6, Jitter: 0.2, MaxDelay: maxBackoff},
		MinConnectTimeout: *deadline,
	}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer connection.Close()
	dealer := gnauv1.NewDealerServiceClient(connection)
	err = catalogue(dealer)
	for i := 0; err == nil && i < *rounds; i++ {
		err = playRound(dealer)
	}
	if err != nil {
		event := map[string]interface{}{"message": err.Error()}
		var r *refusal
		if errors.As(err, &r) {
			event = map[string]interface{}{"code": codeName(r.code), "reason": r.reason, "message": r.message}
		}
		emit("error", event)
		connection.Close()
		os.Exit(1)
	}
}
