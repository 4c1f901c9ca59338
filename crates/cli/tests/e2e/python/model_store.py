"""Drives `tessera up`'s model store with boto3 (`pip install boto3`), a real S3 client.

Usage: model_store.py ENDPOINT ACCESS_KEY SECRET_KEY PRESIGNED_URL. Prints one JSON object of
what the client saw; the Rust end-to-end test (model_store.rs) asserts on it. The presigned URL
was made by Tessera's own SigV4 signer and is fetched here with plain HTTP (urllib).
"""

import base64
import hashlib
import io
import json
import sys
import urllib.request

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

MIB = 1 << 20


def s3_client(endpoint, key, secret):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def error_code(call):
    try:
        call()
    except ClientError as error:
        return error.response["Error"]["Code"]
    return None


def http_get(url, headers=None):
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request) as response:
        return response.status, response.headers, response.read()


def main():
    endpoint, key, secret, presigned = sys.argv[1:5]
    s3 = s3_client(endpoint, key, secret)
    seen = {}

    s3.create_bucket(Bucket="scratch-bucket")
    seen["buckets"] = sorted(b["Name"] for b in s3.list_buckets()["Buckets"])
    seen["invalidBucket"] = error_code(lambda: s3.create_bucket(Bucket="b"))
    seen["noSuchBucket"] = error_code(lambda: s3.get_object(Bucket="absent-bucket", Key="x"))
    seen["noSuchKey"] = error_code(lambda: s3.get_object(Bucket="models", Key="acme/tiny/main/absent"))

    # A ~20 MiB multipart upload (8 MiB parts) into the models bucket, then a ranged get.
    big = bytes((i * 131 + 7) % 251 for i in range(20 * MIB))
    s3.upload_fileobj(
        io.BytesIO(big),
        "models",
        "acme/big/main/model.safetensors",
        Config=TransferConfig(multipart_threshold=8 * MIB, multipart_chunksize=8 * MIB),
    )
    head = s3.head_object(Bucket="models", Key="acme/big/main/model.safetensors")
    seen["bigSha256"] = hashlib.sha256(big).hexdigest()
    seen["bigETag"] = head["ETag"]
    seen["bigLength"] = head["ContentLength"]
    ranged = s3.get_object(
        Bucket="models", Key="acme/big/main/model.safetensors", Range="bytes=4194304-8388607"
    )
    seen["rangeStatus"] = ranged["ResponseMetadata"]["HTTPStatusCode"]
    seen["contentRange"] = ranged["ContentRange"]
    seen["rangeMatches"] = ranged["Body"].read() == big[4194304:8388608]

    # Listing with a prefix and a delimiter.
    models = s3.list_objects_v2(Bucket="models", Prefix="acme/", Delimiter="/")
    seen["modelPrefixes"] = [p["Prefix"] for p in models.get("CommonPrefixes", [])]
    tiny = s3.list_objects_v2(Bucket="models", Prefix="acme/tiny/main/")
    seen["tinyKeys"] = [o["Key"] for o in tiny.get("Contents", [])]

    # A wrong secret is refused.
    wrong = s3_client(endpoint, key, secret + "x")
    seen["wrongSecret"] = error_code(lambda: wrong.list_buckets())

    # Tessera's presigned URL, with plain HTTP.
    status, _, body = http_get(presigned)
    seen["presignedStatus"] = status
    seen["presignedSha256"] = hashlib.sha256(body).hexdigest()
    try:
        # The signature is the URL's last parameter: change its last digit.
        http_get(presigned[:-1] + ("1" if presigned.endswith("0") else "0"))
        seen["tamperedStatus"] = 200
    except urllib.error.HTTPError as error:
        seen["tamperedStatus"] = error.code

    # The ModelPack view of both models, read with the store's key as Basic credentials.
    try:
        http_get(f"{endpoint}/v2/acme/tiny/manifests/main")
    except urllib.error.HTTPError as error:
        seen["ociAnonymousStatus"] = error.code
        seen["ociChallenge"] = error.headers.get("WWW-Authenticate")
    basic = base64.b64encode(f"{key}:{secret}".encode()).decode()
    auth = {"Authorization": f"Basic {basic}"}
    accept = {"Accept": "application/vnd.oci.image.manifest.v1+json", **auth}
    for name in ("tiny", "big"):
        _, headers, body = http_get(f"{endpoint}/v2/acme/{name}/manifests/main", accept)
        manifest = json.loads(body)
        seen[f"{name}ArtifactType"] = manifest["artifactType"]
        seen[f"{name}Layers"] = {
            layer["annotations"]["org.cncf.model.filepath"]: [layer["digest"], layer["mediaType"]]
            for layer in manifest["layers"]
        }
    status, headers, body = http_get(
        f"{endpoint}/v2/acme/big/blobs/sha256:{seen['bigSha256']}", {"Range": "bytes=0-9", **auth}
    )
    seen["blobRangeStatus"] = status
    seen["blobContentRange"] = headers.get("Content-Range")
    seen["blobRangeMatches"] = body == big[:10]

    print(json.dumps(seen))


if __name__ == "__main__":
    main()
