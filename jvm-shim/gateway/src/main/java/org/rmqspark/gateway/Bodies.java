package org.rmqspark.gateway;

import apache.rocketmq.v2.Code;
import com.github.luben.zstd.ZstdInputStream;
import net.jpountz.lz4.LZ4FrameInputStream;
import org.apache.rocketmq.common.compression.CompressionType;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.zip.GZIPInputStream;
import java.util.zip.InflaterInputStream;

/**
 * Decompresses message bodies with a bound on the output (the gateway's max message size): a few KiB of compressed
 * data can claim gigabytes, from a producer (a stored body) or a caller (a GZIP send). Past the bound the message
 * is refused with MESSAGE_BODY_TOO_LARGE naming it; memory stays bounded.
 */
final class Bodies {
    private Bodies() {
    }

    /** A GZIP body of a SendMessage, at most {@code limit} bytes. */
    static byte[] gunzip(byte[] raw, int limit, String what) {
        try {
            return readBounded(new GZIPInputStream(new ByteArrayInputStream(raw)), limit, "gzip", what);
        } catch (IOException e) {
            throw GatewayException.badRequest(what + ": body_encoding is GZIP but the body is not gzip data: "
                + e.getMessage());
        }
    }

    /** A stored body compressed as {@code sysFlag} says (zlib, LZ4 frame or zstd), at most {@code limit} bytes. */
    static byte[] uncompress(byte[] raw, int sysFlag, int limit, String what) throws IOException {
        CompressionType type = MessageSysFlag.getCompressionType(sysFlag);
        InputStream in = new ByteArrayInputStream(raw);
        switch (type) {
            case LZ4:
                in = new LZ4FrameInputStream(in);
                break;
            case ZSTD:
                in = new ZstdInputStream(in);
                break;
            default: // ZLIB, and producers that set no compression type
                in = new InflaterInputStream(in);
                break;
        }
        return readBounded(in, limit, type.name().toLowerCase(), what);
    }

    private static byte[] readBounded(InputStream in, int limit, String codec, String what) throws IOException {
        try (InputStream stream = in) {
            ByteArrayOutputStream out = new ByteArrayOutputStream(Math.min(limit, 64 * 1024));
            byte[] chunk = new byte[64 * 1024];
            int n;
            while ((n = stream.read(chunk)) > 0) {
                if (out.size() + n > limit) {
                    throw new GatewayException(Code.MESSAGE_BODY_TOO_LARGE, what + ": the " + codec + "-compressed "
                        + "body expands past " + limit + " bytes (the gateway's --max-message-bytes)");
                }
                out.write(chunk, 0, n);
            }
            return out.toByteArray();
        }
    }
}
