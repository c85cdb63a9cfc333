// Package questions is the question port: the place where a run asks a
// human something (ask_user) or asks for permission (the approval gate),
// and where the human's web console or any HTTP client sees those cards and
// answers them (DESIGN.md §3 "Questions").
//
// Everything is in memory. A pending question is a caller blocked in Ask;
// when sandboxd stops, Close reports every pending question to its caller
// as expired, so nothing is left hanging, and after a restart there is
// nothing to restore: the callers went with the old process.
package questions

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Kinds of a question card.
const (
	KindQuestion   = "question"
	KindPermission = "permission"
)

// Statuses of a resolved question.
const (
	StatusAnswered  = "answered"
	StatusSkipped   = "skipped"
	StatusExpired   = "expired"
	StatusCanceled  = "canceled"  // the run ended
	StatusWithdrawn = "withdrawn" // the caller stopped waiting
)

// Caps on what a question may hold, so one card cannot flood a console.
const (
	MaxOptions        = 20
	MaxQuestionBytes  = 4 << 10
	MaxContextBytes   = 16 << 10
	MaxLabelBytes     = 200
	MaxDescBytes      = 1 << 10
	MaxAnswerTextByte = 16 << 10
)

// Option is one numbered choice of a question (numbered from 1).
type Option struct {
	Label       string `json:"label"`
	Description string `json:"description"`
}

// Question is a card as the human sees it (DESIGN.md §3; contract).
type Question struct {
	ID            string    `json:"id"`
	Space         string    `json:"space"`
	Run           string    `json:"run"`
	Kind          string    `json:"kind"`
	Question      string    `json:"question"`
	Context       string    `json:"context"`
	Options       []Option  `json:"options"`
	AllowFreeText bool      `json:"allow_free_text"`
	MultiSelect   bool      `json:"multi_select"`
	ExpiresAt     time.Time `json:"expires_at"`
}

// Answer is the body of POST /v1/questions/{id}/answer.
type Answer struct {
	Choices []int  `json:"choices,omitempty"`
	Text    string `json:"text,omitempty"`
	Skip    bool   `json:"skip,omitempty"`
}

// Resolution is how a question ended; it is also the data of a `resolved`
// event.
type Resolution struct {
	ID      string `json:"id"`
	Space   string `json:"space"`
	Status  string `json:"status"`
	Choices []int  `json:"choices,omitempty"`
	Text    string `json:"text,omitempty"`
}

// Chosen returns the chosen options as "N. label" lines.
func (r Resolution) Chosen(q Question) []string {
	var out []string
	for _, c := range r.Choices {
		if c >= 1 && c <= len(q.Options) {
			out = append(out, fmt.Sprintf("%d. %s", c, q.Options[c-1].Label))
		}
	}
	return out
}

// validateQuestion checks what a caller put on a card.
func validateQuestion(q *Question) error {
	q.Question = strings.TrimSpace(q.Question)
	switch {
	case q.Kind != KindQuestion && q.Kind != KindPermission:
		return errdefs.InvalidArgument("question kind %q is not known; use %q or %q", q.Kind, KindQuestion, KindPermission)
	case q.Question == "":
		return errdefs.InvalidArgument("the question is empty; write the question the human should answer")
	case len(q.Question) > MaxQuestionBytes:
		return errdefs.InvalidArgument("the question is %d bytes, more than %d; keep the question short and put detail in context", len(q.Question), MaxQuestionBytes)
	case len(q.Context) > MaxContextBytes:
		return errdefs.InvalidArgument("context is %d bytes, more than %d; shorten it", len(q.Context), MaxContextBytes)
	case len(q.Options) > MaxOptions:
		return errdefs.InvalidArgument("%d options are more than %d; offer fewer options", len(q.Options), MaxOptions)
	case !utf8.ValidString(q.Question + q.Context):
		return errdefs.InvalidArgument("the question or its context is not valid UTF-8; send text")
	}
	seen := map[string]int{}
	for i, o := range q.Options {
		l := strings.TrimSpace(o.Label)
		switch {
		case l == "":
			return errdefs.InvalidArgument("option %d has an empty label; give every option a short label", i+1)
		case len(l) > MaxLabelBytes:
			return errdefs.InvalidArgument("option %d's label is longer than %d bytes; put detail in its description", i+1, MaxLabelBytes)
		case len(o.Description) > MaxDescBytes:
			return errdefs.InvalidArgument("option %d's description is longer than %d bytes; shorten it", i+1, MaxDescBytes)
		}
		if j, dup := seen[l]; dup {
			return errdefs.InvalidArgument("options %d and %d have the same label %q; make every label distinct", j, i+1, l)
		}
		seen[l] = i + 1
		q.Options[i].Label = l
	}
	if len(q.Options) == 0 {
		// With nothing to pick, typing is the only way to answer.
		q.AllowFreeText = true
		q.MultiSelect = false
	}
	if q.Options == nil {
		q.Options = []Option{}
	}
	return nil
}

// validateAnswer checks an answer against its question. Every problem is a
// 400: the question stays open for a corrected answer.
func validateAnswer(q Question, a *Answer) error {
	if a.Skip {
		if len(a.Choices) > 0 || a.Text != "" {
			return errdefs.InvalidArgument("a skip carries no choices or text; send {\"skip\": true} alone, or answer without skip")
		}
		return nil
	}
	if len(a.Choices) == 0 && strings.TrimSpace(a.Text) == "" {
		if q.AllowFreeText && len(q.Options) > 0 {
			return errdefs.InvalidArgument("the answer is empty; choose an option (\"choices\": [1]), write \"text\", or send {\"skip\": true}")
		}
		if q.AllowFreeText {
			return errdefs.InvalidArgument("the answer is empty; write \"text\", or send {\"skip\": true}")
		}
		return errdefs.InvalidArgument("the answer is empty; choose an option (\"choices\": [1]) or send {\"skip\": true}")
	}
	if len(a.Choices) > 1 && !q.MultiSelect {
		return errdefs.InvalidArgument("this question takes one choice, not %d; send one option number", len(a.Choices))
	}
	seen := map[int]bool{}
	for _, c := range a.Choices {
		if c < 1 || c > len(q.Options) {
			if len(q.Options) == 0 {
				return errdefs.InvalidArgument("this question has no options; answer with \"text\"")
			}
			return errdefs.InvalidArgument("choice %d is not an option; options are numbered 1 to %d", c, len(q.Options))
		}
		if seen[c] {
			return errdefs.InvalidArgument("choice %d is given twice; list each option once", c)
		}
		seen[c] = true
	}
	if a.Text != "" {
		if !q.AllowFreeText {
			return errdefs.InvalidArgument("this question does not take free text; choose from its options")
		}
		if len(a.Text) > MaxAnswerTextByte {
			return errdefs.InvalidArgument("the text is %d bytes, more than %d; shorten it", len(a.Text), MaxAnswerTextByte)
		}
		if !utf8.ValidString(a.Text) {
			return errdefs.InvalidArgument("the text is not valid UTF-8; send text")
		}
	}
	return nil
}
