package pin

import "time"

// FormatTime renders t for Info; "" for the zero time.
func FormatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// ErrString renders err for Info; "" for nil.
func ErrString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
