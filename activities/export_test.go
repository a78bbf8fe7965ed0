package activities

// CallPriority exports callPriority to the external tests, which read the
// catalogue of package workflows (an import the package itself cannot
// make).
var CallPriority = callPriority
