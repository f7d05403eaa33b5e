# Sourced by scripts/lock and scripts/install: where the CPU build of torch comes from.
#
# The locks pin torch's CPU build (torch==X+cpu): the quickstart and the tests run on the CPU, and PyPI's
# torch is the CUDA build (about 4 GB more). PyPI does not carry the CPU build; it lies in a local wheel
# folder where pip is configured with one (find-links, as on the project's CI machines) and otherwise in
# PyTorch's own CPU wheel index. The lock's hashes decide which bytes are accepted, wherever they come from.
TORCH_CPU_WHEELS_URL="https://download.pytorch.org/whl/cpu/torch/"

# Prints one "--find-links LOCATION" pair per line: UV_FIND_LINKS, else pip's find-links (its environment
# variable or its configuration), else PyTorch's CPU index page.
torch_find_links() {
  local links="${UV_FIND_LINKS:-${PIP_FIND_LINKS:-}}"
  if [ -z "$links" ]; then
    links="$(python3 -m pip config get global.find-links 2>/dev/null || true)"
  fi
  links="${links:-$TORCH_CPU_WHEELS_URL}"
  local link
  for link in $links; do
    printf -- '--find-links\n%s\n' "$link"
  done
}
