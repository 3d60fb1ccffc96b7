// Command mutator is a test-only mutating admission webhook: it adds one annotation to every pod
// it is sent, so that a webhook called before it (placement-webhook) is reinvoked by the
// apiserver (reinvocationPolicy: IfNeeded) and has to recognise its own earlier patch.
package main

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"log"
	"net/http"
)

type review struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Request    *request        `json:"request,omitempty"`
	Response   json.RawMessage `json:"response,omitempty"`
}

type request struct {
	UID    string `json:"uid"`
	Object struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	} `json:"object"`
}

const annotation = "mutator.test/touched"

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	cert := flag.String("cert", "", "serving certificate (PEM)")
	key := flag.String("key", "", "serving key (PEM)")
	flag.Parse()

	http.HandleFunc("/mutate", func(w http.ResponseWriter, r *http.Request) {
		var in review
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		resp := map[string]any{"uid": in.Request.UID, "allowed": true}
		if _, done := in.Request.Object.Metadata.Annotations[annotation]; !done {
			var ops []map[string]any
			if in.Request.Object.Metadata.Annotations == nil {
				ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{}})
			}
			ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations/mutator.test~1touched", "value": "true"})
			patch, _ := json.Marshal(ops)
			resp["patchType"] = "JSONPatch"
			resp["patch"] = base64.StdEncoding.EncodeToString(patch)
		}
		out, _ := json.Marshal(map[string]any{"apiVersion": in.APIVersion, "kind": in.Kind, "response": resp})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
	log.Printf("mutator listening on %s", *addr)
	log.Fatal(http.ListenAndServeTLS(*addr, *cert, *key, nil))
}
