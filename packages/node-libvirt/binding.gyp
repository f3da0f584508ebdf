{
  "targets": [
    {
      "target_name": "kvts_libvirt",
      "sources": ["native/binding.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
      "cflags_cc": ["-std=c++17", "-fexceptions", "<!@(pkg-config --cflags libvirt libvirt-qemu)"],
      "libraries": ["<!@(pkg-config --libs libvirt libvirt-qemu)"]
    }
  ]
}
