package config

import (
	"strings"
	"testing"
)

func TestE2BSection(t *testing.T) {
	for yaml, want := range map[string]string{
		"e2b: {templates: {base: img:1, py: py:3}, domain: e2b.example.com, network: proxy}": "",
		"e2b: {templates: {base: ''}}":             "e2b.templates.base: the image is empty",
		"e2b: {templates: {'a b': img}}":           `e2b.templates: template name "a b" is not a plain name`,
		"e2b: {network: wifi}":                     `e2b.network: "wifi" is not a network mode`,
		"e2b: {domain: 'https://e2b.example.com'}": "e2b.domain: \"https://e2b.example.com\" is not a bare domain",
		"e2b: {domain: E2B.example.com}":           "has upper-case letters",
		"e2b: {domain: nodot}":                     "is not a domain with a dot in it",
		"e2b: {user: agent, no_sudo: true}":        "",
		"e2b: {user: 'a:b'}":                       `e2b.user: "a:b" is not an account name`,
	} {
		cfg, err := Parse([]byte(yaml))
		if err == nil {
			err = cfg.Validate()
		}
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", yaml, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %q", yaml, err, want)
		}
	}
	cfg, _ := Parse([]byte("default_image: mine:1"))
	if got := cfg.E2BTemplates(); len(got) != 2 || got["base"] != "mine:1" || got["code-interpreter-v1"] != "mine:1" {
		t.Errorf("default templates: %v", got)
	}
}
