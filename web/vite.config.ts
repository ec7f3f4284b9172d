import { defineConfig } from "vite";

// The build goes to dist/ui, which web/embed.go embeds into the kiln
// binary. dist/NOT-BUILT.txt stays (it is committed; dist/ui is not).
export default defineConfig({
  base: "/",
  build: {
    outDir: "dist/ui",
    emptyOutDir: true,
    target: "es2022",
    chunkSizeWarningLimit: 8000, // Monaco is one large chunk, loaded lazily
    modulePreload: { polyfill: false }, // the polyfill would be an inline script, which the CSP refuses
  },
  worker: { format: "es" },
  test: { include: ["src/**/*.test.ts"] },
} as any);
