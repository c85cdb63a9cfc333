package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
)

// bounds is the range a number must lie within: the schema's minimum and
// maximum where declared, else what the Go type a tool decodes into can
// hold (int64 for an integer, float64 for a number). Without these a value
// such as 9223372036854775808 or 1e999 would pass validation and then fail
// in the tool's json.Unmarshal as an internal error.
type bounds struct {
	lo, hi                 *big.Float // nil: no bound on that side (an untyped schema)
	loDeclared, hiDeclared bool
	// loInt and hiInt are lo and hi when both are integers that fit int64:
	// then a plainly written integer is compared without big.Float.
	loInt, hiInt int64
	intOK        bool
}

func newBounds(s *Schema) bounds {
	var b bounds
	var implicitLo, implicitHi *big.Float
	switch {
	case s.allows("number"):
		implicitLo, implicitHi = new(big.Float).SetFloat64(-math.MaxFloat64), new(big.Float).SetFloat64(math.MaxFloat64)
	case s.allows("integer"):
		implicitLo, implicitHi = new(big.Float).SetInt64(math.MinInt64), new(big.Float).SetInt64(math.MaxInt64)
	}
	b.lo, b.loDeclared = tighter(s.minimum, implicitLo, 1)
	b.hi, b.hiDeclared = tighter(s.maximum, implicitHi, -1)
	if lo, ok := asInt64(b.lo); ok {
		if hi, ok := asInt64(b.hi); ok {
			b.loInt, b.hiInt, b.intOK = lo, hi, true
		}
	}
	return b
}

// tighter picks the declared bound unless the implicit one is stricter
// (sign 1 for a lower bound, -1 for an upper one).
func tighter(declared, implicit *big.Float, sign int) (*big.Float, bool) {
	switch {
	case declared == nil:
		return implicit, false
	case implicit != nil && declared.Cmp(implicit)*sign < 0:
		return implicit, false
	}
	return declared, true
}

func asInt64(f *big.Float) (int64, bool) {
	if f == nil || !f.IsInt() {
		return 0, false
	}
	i, acc := f.Int64()
	return i, acc == big.Exact
}

// check returns "" when n lies within the bounds, else the error message.
func (b *bounds) check(n json.Number, at string) string {
	if b.lo == nil && b.hi == nil {
		return ""
	}
	if b.intOK {
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			if i < b.loInt || i > b.hiInt {
				return b.sentence(at, string(n), i < b.loInt)
			}
			return ""
		}
	}
	f, _, err := big.ParseFloat(string(n), 10, 128, big.ToNearestEven)
	if err != nil {
		return fmt.Sprintf("%s is not a usable number: %s", subject(at), clip(string(n), 40))
	}
	switch {
	case b.lo != nil && f.Cmp(b.lo) < 0:
		return b.sentence(at, string(n), true)
	case b.hi != nil && f.Cmp(b.hi) > 0:
		return b.sentence(at, string(n), false)
	}
	return ""
}

// sentence names the argument, the end of the range the value is past and,
// when the schema declares both ends, the whole range.
func (b *bounds) sentence(at, got string, low bool) string {
	got = clip(got, 40)
	var msg string
	if low {
		msg = fmt.Sprintf("%s must be at least %s, got %s", subject(at), numText(b.lo), got)
	} else {
		msg = fmt.Sprintf("%s must be at most %s, got %s", subject(at), numText(b.hi), got)
	}
	if b.loDeclared && b.hiDeclared {
		msg += fmt.Sprintf(" (allowed: %s to %s)", numText(b.lo), numText(b.hi))
	}
	return msg
}

var plainLimit = big.NewFloat(1e21)

// numText writes a bound as a person would: 2147483647, not 2.147483647e+09.
func numText(f *big.Float) string {
	if f.IsInt() && new(big.Float).Abs(f).Cmp(plainLimit) < 0 {
		return f.Text('f', 0)
	}
	return f.Text('g', -1)
}

// plainInt reports whether n is written as a JSON integer that fits int64
// (what encoding/json decodes into an int without complaint).
func plainInt(n json.Number) bool {
	_, err := strconv.ParseInt(string(n), 10, 64)
	return err == nil
}

// canonicalInt rewrites an integer value spelled with a fraction or an
// exponent (3.0, 1e2) as the plain integer; ok is false when n is not an
// integer that fits int64.
func canonicalInt(n json.Number) (json.Number, bool) {
	f, _, err := big.ParseFloat(string(n), 10, 128, big.ToNearestEven)
	if err != nil || !f.IsInt() {
		return "", false
	}
	i, acc := f.Int64()
	if acc != big.Exact {
		return "", false
	}
	return json.Number(strconv.FormatInt(i, 10)), true
}
