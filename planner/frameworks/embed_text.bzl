"""embed_text: a header that holds a text file as a C++ string (planner/frameworks/embed_text.sh)."""

def embed_text(name, src, symbol, out):
    """Generates `out`, declaring `inline constexpr const char* symbol` with the text of `src`."""
    native.genrule(
        name = name,
        srcs = [src],
        outs = [out],
        cmd = "bash $(location embed_text.sh) " + symbol + " $(location " + src + ") > $@",
        tools = ["embed_text.sh"],
    )
