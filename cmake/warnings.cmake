# Warnings as errors on kascade's own code (not on third-party headers, included as SYSTEM).
function(kascade_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -Wno-unused-parameter>
    # GCC 12 reports false positives inside libstdc++ (<regex>, string concatenation) under the
    # sanitizers and at -O3; they are not errors in our code.
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${KASCADE_SANITIZE}>>:-Wno-maybe-uninitialized>
    $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Werror,-Wno-unused-parameter --Werror=all-warnings>)
endfunction()
