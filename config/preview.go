package config

import (
	"fmt"
	"strings"
	"time"
)

// Preview configures the links that show a port of a sandbox to a browser
// without the tenant's token (package ports). Every key may be left out.
type Preview struct {
	// Domain, when set, serves previews by host name:
	// {port}-{preview id}.{domain} answered at "/", so apps that use
	// absolute paths work. It needs a wildcard DNS record (and
	// certificate) for *.{domain} pointing at sandboxd. Without it,
	// previews are served under /p/{token}/ on sandboxd's own address.
	Domain string `yaml:"domain"`
	// DefaultTTL is how long a link lives when its request names no ttl_s
	// (default 1h).
	DefaultTTL Duration `yaml:"default_ttl"`
	// MaxTTL caps the ttl_s a request may ask for (default 24h).
	MaxTTL Duration `yaml:"max_ttl"`
}

// Defaults of the preview section.
const (
	DefaultPreviewTTL    = time.Hour
	DefaultPreviewMaxTTL = 24 * time.Hour
)

// TTLs are the default and the maximum lifetime with the defaults filled in.
func (p Preview) TTLs() (def, most time.Duration) {
	def, most = p.DefaultTTL.D(), p.MaxTTL.D()
	if most == 0 {
		most = max(DefaultPreviewMaxTTL, def)
	}
	if def == 0 {
		def = min(DefaultPreviewTTL, most)
	}
	return def, most
}

// Check reports the first bad value of the preview section.
func (p Preview) Check() error {
	d := p.Domain
	switch {
	case p.DefaultTTL < 0 || p.MaxTTL < 0:
		return fmt.Errorf("preview.default_ttl: it and max_ttl must be positive durations, such as \"1h\"; leave a key out for its default")
	case p.MaxTTL > 0 && p.DefaultTTL > p.MaxTTL:
		return fmt.Errorf("preview.default_ttl: %v is longer than max_ttl %v; raise max_ttl or shorten default_ttl", p.DefaultTTL.D(), p.MaxTTL.D())
	case d == "":
		return nil
	case strings.Contains(d, "://") || strings.ContainsAny(d, "/:*"):
		return fmt.Errorf("preview.domain: %q is not a bare domain; write only the name previews live under, such as preview.example.com", d)
	case strings.HasPrefix(d, ".") || strings.HasSuffix(d, ".") || !strings.Contains(d, ".") && d != "localhost":
		return fmt.Errorf("preview.domain: %q is not a domain with a dot in it; write it as preview.example.com (no leading or trailing dot)", d)
	case strings.ToLower(d) != d:
		return fmt.Errorf("preview.domain: %q has upper-case letters; host names are matched in lower case, write it so", d)
	}
	return nil
}
