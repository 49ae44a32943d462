# The edge node image: one program, every role (EDGE_ROLE picks one). Sources run through tsx, as in development.
FROM node:20-bookworm-slim AS deps
WORKDIR /app
# bcrypt ships prebuilt binaries; build tools are only a fallback for platforms without one.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production \
    EDGE_DATA_DIR=/data \
    EDGE_BIND_HOST=0.0.0.0
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY bin ./bin
COPY config ./config
COPY src ./src
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080 8443 8081 8444
HEALTHCHECK --interval=15s --timeout=3s CMD node -e "fetch('http://127.0.0.1:'+(process.env.EDGE_CONTROL_PORT||8081)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
ENTRYPOINT ["node", "bin/edge.js"]
CMD ["serve"]
