"""Hostile strings planted in test profiles (operator names, paths): they
must render as text and never run."""

XSS_SCRIPT = "<script>alert(1)</script>"
XSS_IMG = '"><img src=x onerror=alert(1)>'
XSS_FLAG_SCRIPT = "<script>window.__pwned=1</script>"
