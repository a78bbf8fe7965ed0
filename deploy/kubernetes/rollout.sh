#!/bin/sh
# rollout.sh ships a build of siteops to Kubernetes without stranding work in
# flight (docs/upgrading.md). Each build's workers are a Deployment of
# their own, siteops-worker-<build> (worker-build.yaml.in), which stays until
# no running workflow is pinned to that build; every decision is a `siteops
# release` command run in a worker pod, with that pod's settings: the same
# commands e2e/upgrade_test.go runs.
#
#   rollout.sh deploy IMAGE BUILD_ID
#       Start BUILD_ID's workers beside the running ones (the first build
#       too: kustomization.yaml applies no worker Deployment), wait until
#       they are ready, make BUILD_ID the current version (siteops release
#       promote, run in one of them: it waits until they poll, then moves
#       the runs older builds pinned whose kinds are AutoUpgrade now), then
#       roll the ingress to IMAGE. Running it again changes nothing.
#   rollout.sh retire BUILD_ID [DEPLOYMENT]
#       Ask every RETIRE_EVERY seconds whether no running run is pinned to
#       BUILD_ID (siteops release drained, from a worker of another build),
#       and once it says so (exit 0, never before), delete BUILD_ID's
#       Deployment and budget. DEPLOYMENT names a Deployment made before
#       per-build Deployments (siteops-worker, release 2's manifests).
#   rollout.sh rollback IMAGE BUILD_ID [DEPLOYMENT]
#       Make the older BUILD_ID current again (until siteops release
#       finalize): start its workers again if they were retired, run
#       siteops release rollback from the newer build's worker, roll the
#       ingress back to IMAGE. With DEPLOYMENT (release 2's siteops-worker,
#       still running IMAGE), that Deployment is used as it is and the
#       ingress stays: release 2 reads its secrets only from variables, which
#       these manifests no longer set.
#   rollout.sh status
#       siteops release status, from the newest build's worker.
#   rollout.sh render IMAGE BUILD_ID
#       Print the objects deploy applies (e.g. | kubectl -n siteops diff -f -).
#
# IMAGE is pinned by digest (REGISTRY/siteops@sha256:...): a build id names
# one image. BUILD_ID is the id the image was built with (deploy/Dockerfile's
# VERSION): a Kubernetes label value, not dev, devel, latest, unknown or
# none (a worker refuses those) nor a -dirty one, at most 48 characters (its
# Deployment's name holds it).
#
# Settings: NAMESPACE (siteops); ROLLOUT_TIMEOUT (10m: how long to wait for
# pods, and for promote to see the new build poll); RETIRE_EVERY (30
# seconds); RETIRE_TIMEOUT (0: wait for ever; a build drains within a week of
# its last onboarding's start, the longest an onboarding waits for its
# knowledge).
#
# Exit codes: 0 done; 1 a step failed or RETIRE_TIMEOUT passed (what is done
# stays done; run it again); 2 usage or a refused argument; otherwise the
# exit code of the siteops command that failed (the README's exit codes).
set -eu
LC_ALL=C
export LC_ALL

here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
ns=${NAMESPACE:-siteops}
timeout=${ROLLOUT_TIMEOUT:-10m}
template=$here/worker-build.yaml.in

die() {
	code=$1
	shift
	echo "rollout.sh: $*" >&2
	exit "$code"
}

usage() {
	die 2 "usage: rollout.sh deploy IMAGE BUILD_ID | retire BUILD_ID [DEPLOYMENT] | rollback IMAGE BUILD_ID [DEPLOYMENT] | status | render IMAGE BUILD_ID"
}

k() { kubectl -n "$ns" "$@"; }

# check_label ID: ID may be a label value (selectors and labels hold it).
check_label() {
	case $1 in
	'' | *[!A-Za-z0-9._-]* | [!A-Za-z0-9]* | *[!A-Za-z0-9])
		die 2 "build id '$1' is not a Kubernetes label value: use letters, digits, '.', '-' and '_', starting and ending with a letter or digit"
		;;
	esac
	if [ ${#1} -gt 63 ]; then
		die 2 "build id $1 is longer than 63 characters, which a Kubernetes label cannot hold"
	fi
}

# check_build ID: ID names a build a worker accepts, and a Deployment name
# can hold it.
check_build() {
	check_label "$1"
	case $(printf '%s' "$1" | tr '[:upper:]' '[:lower:]') in
	dev | devel | latest | unknown | none)
		die 2 "build id $1 names no build (a worker refuses it): use the VERSION the image was built with, e.g. git describe --always"
		;;
	esac
	case $1 in
	*-dirty)
		die 2 "build id $1 is git describe's id of every modified tree of its commit: commit, build again and deploy that id"
		;;
	esac
	if [ ${#1} -gt 48 ]; then
		die 2 "build id $1 is longer than 48 characters: its Deployment siteops-worker-<build id> would pass the 63 a name may have"
	fi
}

# check_image IMAGE: pinned by digest, and nothing sed or YAML would read
# as syntax.
check_image() {
	case $1 in
	*[!A-Za-z0-9./:@_-]*)
		die 2 "image '$1' holds characters an image reference does not"
		;;
	*@sha256:*) ;;
	*)
		die 2 "image $1 is not pinned by digest: give REGISTRY/siteops@sha256:<the digest your push printed> (a tag can be moved to other bytes, and a build id names one image)"
		;;
	esac
	digest=${1##*@sha256:}
	case $digest in
	*[!0-9a-f]*) die 2 "image $1: the digest is not 64 hex digits" ;;
	esac
	if [ ${#digest} -ne 64 ]; then
		die 2 "image $1: the digest is not 64 hex digits"
	fi
}

# name BUILD_ID: the name of a build's Deployment and budget (a DNS label).
name() {
	printf 'siteops-worker-%s' "$(printf '%s' "$1" | tr '[:upper:]' '[:lower:]' | tr '._' '--')"
}

# render IMAGE BUILD_ID: the objects of a build (checked arguments).
render() {
	sed -e "s|@NAME@|$(name "$2")|g" -e "s|@BUILD_ID@|$2|g" -e "s|@IMAGE@|$1|g" "$template"
}

# newest [EXCEPT_BUILD_ID]: the newest per-build worker Deployment (of a
# build other than EXCEPT_BUILD_ID), as deployment.apps/NAME; "" when none.
# Only those run release 3 or later, which has siteops release.
newest() {
	sel=app.kubernetes.io/name=siteops,app.kubernetes.io/component=worker,siteops.dev/build-id
	if [ -n "${1:-}" ]; then
		sel="$sel,siteops.dev/build-id!=$1"
	fi
	k get deployment -l "$sel" --sort-by=.metadata.creationTimestamp -o name | tail -n 1
}

# runs DEPLOYMENT: "BUILD_ID IMAGE" of an existing Deployment ("" when there
# is none; BUILD_ID is "" for one made before per-build Deployments).
runs() {
	k get deployment "$1" --ignore-not-found -o 'jsonpath={.metadata.labels.siteops\.dev/build-id}{" "}{.spec.template.spec.containers[?(@.name=="worker")].image}'
}

# start IMAGE BUILD_ID: apply BUILD_ID's objects and wait for its pods.
start() {
	d=$(name "$2")
	have=$(runs "$d")
	have_build=${have%% *}
	have_image=${have#* }
	if [ -n "$have" ] && [ "$have_build" != "$2" ]; then
		die 2 "the Deployment $d runs build '$have_build', and build ids $2 and $have_build make the same name: deploy this build under another id"
	fi
	if [ -n "$have" ] && [ "$have_image" != "$1" ]; then
		die 2 "build $2 runs image $have_image already: the runs it pinned must replay on that code, so a build id names one image; build the new image with a new VERSION and deploy that id"
	fi
	# The manifests before release 3 had one budget selecting every worker
	# pod; beside the per-build budgets a pod would have two, and the
	# eviction API refuses to evict such a pod (a node drain would stall).
	k delete poddisruptionbudget siteops-worker --ignore-not-found
	objects=$(render "$1" "$2")
	printf '%s\n' "$objects" | k apply -f -
	k rollout status "deployment/$d" --timeout="$timeout"
}

# ingress IMAGE: roll the ingress to IMAGE (a rolling update: an ingress
# keeps nothing of its own).
ingress() {
	k set image deployment/siteops-ingress "ingress=$1"
	k rollout status deployment/siteops-ingress --timeout="$timeout"
}

# siteops DEPLOYMENT ARGS...: run siteops in a worker of DEPLOYMENT; dies
# with its exit code when it fails.
siteops() {
	d=$1
	shift
	code=0
	k exec "$d" -c worker -- /siteops "$@" || code=$?
	if [ "$code" -ne 0 ]; then
		die "$code" "siteops $* (in $d) exited $code; what is done stays done: fix what it said and run rollout.sh again"
	fi
}

case ${1:-} in
render)
	[ $# -eq 3 ] || usage
	check_image "$2"
	check_build "$3"
	render "$2" "$3"
	;;
deploy)
	[ $# -eq 3 ] || usage
	image=$2 build=$3
	check_image "$image"
	check_build "$build"
	start "$image" "$build"
	# Only now that its pods are ready: promote waits until they poll every
	# task queue, makes the build current and moves the runs older builds
	# pinned whose kinds it declares AutoUpgrade; it lists those that stay.
	siteops "deployment/$(name "$build")" release promote --build-id "$build" --timeout "$timeout"
	ingress "$image"
	echo "rollout.sh: $build is current. Retire each older build once it has drained: rollout.sh retire <its build id>"
	;;
retire)
	if [ $# -lt 2 ] || [ $# -gt 3 ]; then usage; fi
	build=$2
	check_label "$build"
	d=${3:-$(name "$build")}
	every=${RETIRE_EVERY:-30} limit=${RETIRE_TIMEOUT:-0}
	case $every$limit in
	*[!0-9]*) die 2 "RETIRE_EVERY ($every) and RETIRE_TIMEOUT ($limit) are whole seconds" ;;
	esac
	have=$(runs "$d")
	have_build=${have%% *}
	if [ -z "$have" ]; then
		die 2 "there is no Deployment $d; name the one build $build runs in: rollout.sh retire $build DEPLOYMENT"
	fi
	if [ "$have_build" != "$build" ] && { [ -n "$have_build" ] || [ $# -ne 3 ]; }; then
		die 2 "the Deployment $d runs build '$have_build', not $build: deleting it would strand that build's runs"
	fi
	asker=$(newest "$build")
	if [ -z "$asker" ]; then
		die 2 "no worker Deployment of another build to ask siteops release drained from: deploy the new build first (rollout.sh deploy)"
	fi
	waited=0
	while :; do
		code=0
		k exec "$asker" -c worker -- /siteops release drained --build-id "$build" || code=$?
		case $code in
		0) break ;;
		1) ;; # runs are still pinned to it (listed above), or kubectl failed
		5) echo "rollout.sh: Temporal could not be reached; asking again" >&2 ;;
		*) die "$code" "siteops release drained exited $code, which is not \"not drained yet\": fix what it said; the Deployment $d stays" ;;
		esac
		if [ "$limit" -gt 0 ] && [ "$waited" -ge "$limit" ]; then
			die 1 "build $build has not drained after ${limit}s; its Deployment $d stays (run rollout.sh retire again later)"
		fi
		sleep "$every"
		waited=$((waited + every))
	done
	# Drained: no run needs these workers any more.
	k delete deployment "$d"
	k delete poddisruptionbudget "$d" --ignore-not-found
	echo "rollout.sh: build $build has drained; its Deployment $d is deleted"
	;;
rollback)
	if [ $# -lt 3 ] || [ $# -gt 4 ]; then usage; fi
	image=$2 build=$3
	if [ $# -eq 4 ]; then
		d=$4
		check_label "$build"
		have=$(runs "$d")
		if [ -z "$have" ]; then
			die 2 "there is no Deployment $d to roll back to; rollout.sh rollback IMAGE BUILD_ID starts one"
		fi
		if [ -n "${have%% *}" ] && [ "${have%% *}" != "$build" ]; then
			die 2 "the Deployment $d runs build '${have%% *}', not $build"
		fi
		if [ "${have#* }" != "$image" ]; then
			die 2 "the Deployment $d runs image ${have#* }, not $image"
		fi
		k rollout status "deployment/$d" --timeout="$timeout"
	else
		check_image "$image"
		check_build "$build"
		d=$(name "$build")
		start "$image" "$build"
	fi
	# The newer build runs the command: it has it, and its catalogue knows
	# which of its runs must stay on it.
	asker=$(newest "$build")
	if [ -z "$asker" ]; then
		die 2 "no worker Deployment of a newer build to roll back from"
	fi
	siteops "$asker" release rollback --to-build-id "$build" --timeout "$timeout"
	if [ $# -eq 4 ]; then
		echo "rollout.sh: $build is current again. The ingress stays on its image: $d's release reads its secrets only from variables, which these manifests no longer set (an ingress of the newer release works beside its workers)."
	else
		ingress "$image"
		echo "rollout.sh: $build is current again."
	fi
	echo "rollout.sh: the newer build keeps the runs it ran; rollout.sh retire tells when it may go (or roll forward with rollout.sh deploy)."
	;;
status)
	[ $# -eq 1 ] || usage
	asker=$(newest)
	if [ -z "$asker" ]; then
		die 2 "no per-build worker Deployment runs: rollout.sh deploy IMAGE BUILD_ID starts the first"
	fi
	siteops "$asker" release status
	;;
*)
	usage
	;;
esac
