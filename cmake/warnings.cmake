# Warnings as errors on kascade's own code (not on third-party headers, included as SYSTEM).
function(kascade_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -Wno-unused-parameter>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Werror,-Wno-unused-parameter --Werror=all-warnings>)
endfunction()
